{{ dbt_mleval.evaluate(ref('preds_multilabel'),
                       metrics=['average_precision', 'recall', 'log_loss', 'subset_accuracy'],
                       by=['model', 'day'], task='multilabel', average=['macro', 'micro'],
                       columns={'weight': 'weight'}) }}
