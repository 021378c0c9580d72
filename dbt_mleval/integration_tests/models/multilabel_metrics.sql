{{ dbt_mleval.evaluate(ref('preds_multilabel'), metrics=['roc_auc', 'f1'], by=['model'],
                       task='multilabel', columns={'weight': 'weight'}) }}
