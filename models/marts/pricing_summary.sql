-- TPC-H Q1's pricing summary with the derived figures the query reports: average quantity,
-- price and discount per line, the discount given, and each group's share of the lines.
with summary as (

    select * from {{ ref('stg_cumulus__pricing_summary') }}

),

overall as (

    select sum(line_count) as line_count from summary

)

select
    summary.returnflag,
    summary.linestatus,
    summary.line_count,
    cast(summary.line_count as double) / overall.line_count as line_share,
    summary.sum_qty,
    summary.sum_base_price,
    summary.sum_disc_price,
    summary.sum_base_price - summary.sum_disc_price as discount_given,
    cast(summary.sum_qty as double) / summary.line_count as avg_qty,
    cast(summary.sum_base_price as double) / summary.line_count as avg_price,
    summary.avg_disc,
    summary.first_ship,
    summary.last_ship,
    datediff(summary.last_ship, summary.first_ship) as shipping_span_days,
    summary.as_of_epoch
from summary
cross join overall
