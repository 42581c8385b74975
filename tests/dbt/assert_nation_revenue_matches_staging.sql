-- Invariant: the nations' revenue adds up to the revenue of the view itself (to the cent):
-- the mart neither loses nor double-counts a nation or brand.
with mart as (
    select sum(revenue) as revenue, sum(line_count) as line_count from {{ ref('nation_revenue') }}
),

staging as (
    select sum(revenue) as revenue, sum(line_count) as line_count
    from {{ ref('stg_cumulus__revenue_by_nation_brand') }}
)

select mart.revenue as mart_revenue, staging.revenue as staging_revenue,
       mart.line_count as mart_lines, staging.line_count as staging_lines
from mart cross join staging
where mart.revenue <> staging.revenue or mart.line_count <> staging.line_count
