-- the rows of expected (scikit-learn's values) that a model lacks or differs from by more than 1e-9
with got as (
  select 'multilabel_metrics' as model_name, model, metric, average, label, value
  from {{ ref('multilabel_metrics') }}
  union all
  select 'binary_metrics', model, metric, average, label, value from {{ ref('binary_metrics') }}
)
select e.*
from {{ ref('expected') }} as e
left join got as g
  on g.model_name = e.model_name and g.model = e.model and g.metric = e.metric
  and coalesce(g.average, '') = coalesce(e.average, '') and coalesce(g.label, '') = coalesce(e.label, '')
where g.value is null or abs(g.value - e.value) > 1e-9 * greatest(1.0, abs(e.value))
