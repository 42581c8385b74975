{#- No two rows share the values of `columns` (a composite key). NULLs count as equal
    values, as they do in a GROUP BY, so a view grouped by a nullable column passes only
    when its NULL group appears once. Fails with each repeated key and how often. -#}
{% test cumulus_unique_combination(model, columns) %}
select {{ columns | join(', ') }}, count(*) as occurrences
from {{ model }}
group by {{ columns | join(', ') }}
having count(*) > 1
{% endtest %}
