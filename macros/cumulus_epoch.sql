{#- The stable snapshot the models read: the `epoch` var (the DAG passes the epoch of the
    asset event that triggered it), else the latest published epoch in the ledger. -#}
{% macro cumulus_epoch() -%}
    {#- source() before any return: parsing records the ledger as every caller's input -#}
    {%- set ledger = source('cumulus', 'ledger') -%}
    {%- if not execute -%}
        {{ return(0) }}  {#- parsing: no query; the value is never run -#}
    {%- endif -%}
    {%- set given = var('epoch', '') | string | trim -%}
    {%- if given not in ('', 'None', 'none') -%}
        {%- if not given.isdigit() or given | int < 1 -%}
            {{ exceptions.raise_compiler_error("var epoch must be an epoch number (1, 2, ...), got '" ~ given ~ "'") }}
        {%- endif -%}
        {{ return(given | int) }}
    {%- endif -%}
    {%- set result = run_query("select max(epoch) from " ~ ledger ~ " where state = 'published'") -%}
    {%- set latest = result.columns[0].values()[0] -%}
    {%- if latest is none -%}
        {{ exceptions.raise_compiler_error("no published epoch in the Cumulus ledger: publish one (the cumulus_epoch DAG) or pass --vars '{epoch: N}' for a closed one") }}
    {%- endif -%}
    {{ return(latest | int) }}
{%- endmacro %}

{% macro cumulus_tag() -%}
    epoch-{{ cumulus_epoch() }}
{%- endmacro %}
