{#- Every row satisfies `expression` (a SQL boolean over the model's columns). -#}
{% test cumulus_expression_true(model, expression) %}
select *
from {{ model }}
where not coalesce({{ expression }}, false)
{% endtest %}
