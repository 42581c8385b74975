-- How orders spread over priorities: each priority's share of the orders and of their
-- value, its average order value, and whether it counts as urgent.
with priorities as (

    select * from {{ ref('stg_cumulus__order_priority_mix') }}

),

overall as (

    select sum(order_count) as order_count, sum(total_price) as total_price
    from priorities

)

select
    priorities.priority,
    priorities.order_count,
    cast(priorities.order_count as double) / overall.order_count as order_share,
    priorities.total_price,
    cast(priorities.total_price as double) / cast(overall.total_price as double) as price_share,
    priorities.avg_price,
    priorities.priority in ('1-URGENT', '2-HIGH') as is_urgent,
    priorities.as_of_epoch
from priorities
cross join overall
