/*
 * hb-run: the CPU reference runner.  Admits and loads the artifact
 * (libkern/hb_model, refusing what hb-admit refuses), runs the prompt as one
 * prefill, then decodes N tokens one at a time through the cache, and
 * prints the generated ids, or their text when the prompt was text.  It
 * executes any admitted artifact and states its profile and status word; it
 * never calls an artifact supported.
 *
 * A text prompt (-p, --chat) goes through the artifact's own tokenizer.json
 * (hb_tok) and, for --chat, the native Qwen3.6 template (hb_chat); hb_text
 * joins them so that only template atoms become control ids (AFN-006).
 *
 * This file reads the prompt, loads the model, runs and reports, and maps
 * each failure to its exit status; the parts are under cmd/hb-run/:
 * options.c (usage and parsing), prompt.c (token, text and chat prompts),
 * outputs.c (the route trace and logits dumps), generate.c (prefill and
 * decode) and report.c (the ids, text or JSON record).
 */
#include "hb_base.h"
#include "hb-run/hb_run_cli.h"

int main(int argc, char **argv)
{
	struct cli c;
	struct run r;
	struct gen g;
	struct hb_error err;
	struct hb_model *m = NULL;
	struct text tx;
	int rc, status = HB_EXIT_OK;

	if (run_parse(argc, argv, &c))
		return HB_EXIT_USAGE;
	memset(&r, 0, sizeof(r));
	memset(&g, 0, sizeof(g));
	memset(&tx, 0, sizeof(tx));
	r.c = &c;
	hb_error_clear(&err);
	if ((c.tokens || c.tokens_file) && (rc = run_read_tokens(&c, &g.prompt, &g.np, &err))) {
		hb_cli_error(prog, &err);
		return rc == HB_ERR_INVALID ? HB_EXIT_USAGE : HB_EXIT_SYSTEM;
	}
	/* a conversation that does not render is the caller's: exit 2 */
	if (c.chat && (rc = run_render_chat(&c, &tx.render, &err))) {
		hb_cli_error(prog, &err);
		return rc == HB_ERR_IO || rc == HB_ERR_NOMEM || rc == HB_ERR_NOTFOUND ? HB_EXIT_SYSTEM : HB_EXIT_USAGE;
	}
	if ((rc = hb_backend_cli_start(c.backend, &err))) {
		hb_cli_error(prog, &err);
		free(g.prompt);
		run_text_release(&tx);
		return hb_cli_exit_for(rc);
	}
	rc = hb_model_load_mode(c.model, c.weights, &m, &err);
	if (rc) {
		/* the same diagnostic and exit status hb-admit gives: a refusal
		 * carries a diagnostic id (1); a file that cannot be opened, read
		 * or mapped, or memory, is a system failure (3), whatever the
		 * error code (a missing file is HB_ERR_NOTFOUND, not a refusal) */
		hb_cli_error(prog, &err);
		free(g.prompt);
		run_text_release(&tx);
		hb_backend_cli_stop(c.backend);
		return err.id && strcmp(err.id, "gguf-io") ? HB_EXIT_NO : HB_EXIT_SYSTEM;
	}
	r.m = m;
	hb_backend_cli_model(c.backend, m);
	run_shadow_setup(&r, &c);
	g.run = &r;
	if ((rc = run_xst_setup(&r, &err)))
		goto fail;
	run_engine_observer(&r, &c);
	if ((status = hb_cli_xs_apply(prog, m, &c.xs)) != HB_EXIT_OK)
		goto out;
	if ((rc = run_learned_open(&r, &err))) {
		hb_cli_error(prog, &err);
		status = hb_cli_exit_for(rc);
		goto out;
	}
	if (!c.quiet)
		fprintf(stderr, "%s: artifact profile %s, status %s (runtime_supported false)\n", prog,
			m->profile, m->status);
	if (!c.quiet && m->xs) {
		struct hb_xs_stats st;
		hb_xs_stats_get(m->xs, &st);
		fprintf(stderr, "%s: routed experts streamed: a cache of %u slots of %" PRIu64 " bytes, %s reads, "
			"predictor %s, eviction %s\n", prog, st.slots, st.slot_bytes, hb_xs_io_mode(m->xs),
			c.xs.learned ? "learned" : hb_xs_predictor_name(m->xs_predict),
			hb_xs_policy_name(hb_xs_policy_of(m->xs)));
	}
	if (c.text || c.chat) {
		int st = run_text_prompt(&c, m, &tx);
		if (st >= 0) {
			status = st;
			goto out;
		}
		g.prompt = tx.toks.ids; /* owned by tx */
		g.np = tx.toks.n;
	}
	if (c.verify_oracle) {
		status = run_verify_oracle(&c, m, g.prompt, g.np);
		goto out;
	}
	if ((rc = run_generate(&r, &g, &err)) || (rc = run_outputs_commit(&r, &err)) ||
	    (rc = run_report(&c, m, &tx, &g, &status, &err)))
		goto fail;
	goto out;
fail:
	hb_backend_cli_explain(c.backend, &err);
	hb_cli_error(prog, &err);
	status = hb_cli_exit_for(rc);
out:
	run_outputs_abort(&r);
	run_gen_release(&g);
	hb_backend_cli_stop(c.backend);
	hb_model_free(m); /* its engine's last completions reach the shadow and trace observers */
	if (r.shadow_on)
		hb_shadow_release(&r.shadow);
	run_xst_free(&r);
	if (g.prompt != tx.toks.ids)
		free(g.prompt);
	run_text_release(&tx);
	free(g.gen), free(g.logits);
	if (fflush(stdout) != 0)
		status = HB_EXIT_SYSTEM;
	return status;
}
