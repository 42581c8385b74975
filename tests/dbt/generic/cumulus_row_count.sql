{#- The model has exactly `expected` rows (a view without GROUP BY has one). -#}
{% test cumulus_row_count(model, expected) %}
select count(*) as row_count
from {{ model }}
having count(*) <> {{ expected }}
{% endtest %}
