{#- The values of `column_name` add up to `total` (within `tolerance`) over the model, or
    within each group of `group_by`: shares of a whole sum to 1. -#}
{% test cumulus_sums_to(model, column_name, total=1, tolerance=0.000001, group_by=none) %}
select {% if group_by %}{{ group_by | join(', ') }}, {% endif %}sum({{ column_name }}) as actual
from {{ model }}
{% if group_by %}group by {{ group_by | join(', ') }}{% endif %}
having abs(sum({{ column_name }}) - {{ total }}) > {{ tolerance }}
{% endtest %}
