{#- A model's +schema is its namespace as written (staging, marts), not dbt's default
    <target schema>_<schema>: SQL users read `marts.nation_revenue`. -#}
{% macro generate_schema_name(custom_schema_name, node) -%}
    {{ (custom_schema_name or target.schema) | trim }}
{%- endmacro %}
