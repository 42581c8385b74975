-- Revenue per customer nation at the stable snapshot: its share of all revenue, its rank,
-- and the brand that earns it most.
with brand_revenue as (

    select * from {{ ref('stg_cumulus__revenue_by_nation_brand') }}

),

nations as (

    select
        nation,
        sum(revenue) as revenue,
        sum(line_count) as line_count,
        count(*) as brands,
        max(as_of_epoch) as as_of_epoch
    from brand_revenue
    group by nation

),

ranked_brands as (

    select
        nation,
        brand,
        revenue,
        row_number() over (partition by nation order by revenue desc, brand) as position
    from brand_revenue

),

top_brands as (

    select nation, brand as top_brand, revenue as top_brand_revenue
    from ranked_brands
    where position = 1

),

overall as (

    select sum(revenue) as revenue from nations

)

select
    nations.nation,
    nations.revenue,
    nations.line_count,
    nations.brands,
    cast(nations.revenue as double) / cast(overall.revenue as double) as revenue_share,
    rank() over (order by nations.revenue desc) as revenue_rank,
    top_brands.top_brand,
    top_brands.top_brand_revenue,
    nations.as_of_epoch
from nations
inner join top_brands on nations.nation = top_brands.nation
cross join overall
