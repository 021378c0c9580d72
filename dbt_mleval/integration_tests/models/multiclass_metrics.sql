{{ dbt_mleval.evaluate(ref('preds_multiclass'), metrics=['accuracy', 'f1', 'roc_auc', 'log_loss'],
                       task='multiclass', average=['macro', 'weighted', 'none']) }}
