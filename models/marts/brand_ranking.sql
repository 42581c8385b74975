-- Each brand's revenue within its customers' nation: rank, share of the nation's revenue
-- and of all revenue, revenue per line item.
with brand_revenue as (

    select * from {{ ref('stg_cumulus__revenue_by_nation_brand') }}

),

totals as (

    select
        brand_revenue.*,
        sum(revenue) over (partition by nation) as nation_revenue,
        sum(revenue) over () as total_revenue
    from brand_revenue

)

select
    nation,
    brand,
    revenue,
    line_count,
    rank() over (partition by nation order by revenue desc) as rank_in_nation,
    cast(revenue as double) / cast(nation_revenue as double) as share_of_nation,
    cast(revenue as double) / cast(total_revenue as double) as share_of_total,
    cast(revenue as double) / line_count as revenue_per_line,
    as_of_epoch
from totals
