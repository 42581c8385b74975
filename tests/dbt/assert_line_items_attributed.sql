-- Cross-view check (a warning): every line item of the pricing summary is attributed to a
-- nation and brand. A difference means line items whose order, customer or part is
-- missing at this snapshot (e.g. sources that deliver them in different epochs).
{{ config(severity='warn') }}

with summary as (
    select sum(line_count) as line_count from {{ ref('pricing_summary') }}
),

attributed as (
    select sum(line_count) as line_count from {{ ref('nation_revenue') }}
)

select summary.line_count as summary_lines, attributed.line_count as attributed_lines
from summary cross join attributed
where summary.line_count <> attributed.line_count
