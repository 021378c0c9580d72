{# a click log without a label column: one label, named after the score column #}
{{ dbt_mleval.evaluate(ref('clicks'), metrics=['roc_auc', 'f1', 'precision'], by=['model'],
                       task='binary', threshold=0.4,
                       columns={'sample': 'id', 'score': 'prob', 'truth': 'clicked'}) }}
