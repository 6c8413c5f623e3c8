// app.js - the saelite feature browser (served by `saelite serve`; API in docs/serve.md).
// One page, four views chosen by the path: / (index), /feature/DICT/N, /test, /sql. Views read
// their inputs from the URL (?dict=&q=&sort=..., ?text=, ?sql=), so every state is a link.
// No framework, no network besides this server; text from the database only goes into the
// page through textContent, never as HTML.
'use strict';

const main = document.getElementById('main');

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k === 'style') e.style.cssText = v; // CSSOM: allowed under the page's CSP
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of kids.flat()) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

// exact: integers past 2^53 become BigInts (the console's values; elsewhere the page computes
// with numbers, so there they stay doubles). The reviver's source text needs Chromium 114 or
// Firefox 135; without it they stay doubles.
const exactInt = (k, v, ctx) => (typeof v === 'number' && !Number.isSafeInteger(v) && ctx && /^-?\d+$/.test(ctx.source) ? BigInt(ctx.source) : v);
// An answer that arrives after a newer navigation belongs to a view the user left: it throws
// a stale error (e.stale), which views and route() drop, so the older view cannot fill the
// page under the newer URL (clicking a feature and at once "SQL" showed the feature).
async function api(path, opts, exact) {
  const gen = routes;
  const r = await fetch(path, opts);
  if (gen !== routes) throw Object.assign(new Error('stale'), {stale: true});
  let j;
  try { j = exact ? JSON.parse(await r.text(), exactInt) : await r.json(); } catch (e) { throw new Error(`${path}: HTTP ${r.status}, not JSON`); }
  if (!r.ok) throw new Error(j.error || `HTTP ${r.status}`);
  return j;
}

// A non-finite real comes as {"real": "inf"} or {"real": "-inf"} (JSON has no infinity;
// docs/serve.md); an integer past 2^53 from the console as a BigInt (sqlJSON).
const isInf = (x) => x !== null && typeof x === 'object' && (x.real === 'inf' || x.real === '-inf');
function fmt(x, digits) {
  if (x === null || x === undefined) return '–';
  if (isInf(x)) return x.real === 'inf' ? 'Inf' : '-Inf';
  if (typeof x === 'bigint') return x.toLocaleString('en-US');
  if (typeof x !== 'number') return String(x);
  if (Number.isInteger(x)) return x.toLocaleString('en-US');
  const a = Math.abs(x);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return x.toExponential(2);
  return x.toFixed(digits === undefined ? 3 : digits);
}
// a value to compute with: the marked infinities as numbers (a review found {"real": "inf"}
// reaching toFixed and division)
const num = (x) => (isInf(x) ? (x.real === 'inf' ? Infinity : -Infinity) : x);
// The pagers (the index's and the token list's): "1–50 of N features", or where the offset is
// past the end, so; and "previous" from past the end goes to the last page.
const pageRange = (r, last) => (r.offset >= r.total ? `offset ${fmt(r.offset)} is past the last of ${fmt(r.total)} features`
  : `${r.offset + 1}–${last} of ${fmt(r.total)} features`);
const prevOffset = (r) => Math.max(0, Math.min(r.offset - r.limit, Math.floor((r.total - 1) / r.limit) * r.limit));
const pct = (x) => (typeof x !== 'number' || !Number.isFinite(x) ? (isInf(x) ? fmt(x) : '–') : (100 * x).toFixed(x < 0.001 ? 3 : 2) + '%');
// Token text as a person reads it: newlines and tabs visible, spaces kept.
const shown = (t) => t.replace(/\n/g, '↵').replace(/\t/g, '⇥');

function showError(e) {
  main.replaceChildren(el('p', {class: 'error', id: 'error', text: String(e.message || e)}));
}

let DICTS = [];
async function dicts() {
  if (!DICTS.length) DICTS = (await api('/api/dicts')).dicts;
  return DICTS;
}
// Database text inside a longer string, isolated for bidi (U+2068 first strong isolate ..
// U+2069 pop): a control character in it cannot reorder the rest (options and titles take
// no elements, so no <bdi> there).
const iso = (s) => '\u2068' + s + '\u2069';
const dictName = (d) => `${d.id}: ${d.kind === 'sae' ? (d.transcoder ? 'transcoder ' : 'SAE ') + iso(d.name) : iso(d.name)} (${d.d_sae} features)`;
/* a transcoder's registry row keeps its activation in architecture; the kind and output hook come from its config
   (it showed as "topk k=8" at its input hook, like an SAE there) */
const archText = (d) => `${d.transcoder ? d.transcoder + ' (' : ''}${d.architecture}${d.k ? ' k=' + d.k : ''}${d.transcoder ? ') to ' + d.hook_out : ''}`;

// ---- index ----------------------------------------------------------------------------------
async function viewIndex(params) {
  const ds = await dicts();
  if (!ds.length) { main.replaceChildren(el('p', {text: 'No analysed dictionary in this database: run saelite analyze.'})); return; }
  const dict = params.get('dict') || String(ds[0].id);
  const st = {
    dict, q: params.get('q') || '', tag: params.get('tag') || '', sort: params.get('sort') || 'density',
    order: params.get('order') || 'desc', offset: +(params.get('offset') || 0), limit: 50,
    token: params.get('token') || '', token_offset: +(params.get('token_offset') || 0),
  };
  const go = (patch) => {
    const n = Object.assign({}, st, patch);
    const u = new URLSearchParams();
    const dflt = {q: '', tag: '', sort: 'density', order: 'desc', offset: 0, token: '', token_offset: 0};
    for (const k of ['dict', 'q', 'tag', 'sort', 'order', 'offset', 'token', 'token_offset'])
      if (n[k] !== dflt[k] && String(n[k]) !== String(dflt[k])) u.set(k, n[k]);
    navigate('/?' + u.toString());
  };
  const sel = el('select', {id: 'dict', onchange: (e) => go({dict: e.target.value, offset: 0})},
    ds.map((d) => el('option', {value: d.id, selected: String(d.id) === dict, text: dictName(d)})));
  const q = el('input', {id: 'q', type: 'search', placeholder: 'search tokens, contexts, logits', value: st.q, size: 32});
  const tag = el('input', {id: 'tag', placeholder: 'POS tag', value: st.tag, size: 6});
  const tok = el('input', {id: 'token', placeholder: 'token, e.g. dog', value: st.token, size: 14});
  const form = el('form', {class: 'controls', onsubmit: (e) => { e.preventDefault(); go({q: q.value.trim(), tag: tag.value.trim(), token: tok.value, offset: 0, token_offset: 0}); }},
    el('label', {}, 'Dictionary ', sel), q, tag, el('span', {class: 'muted'}, 'fires on'), tok, el('button', {type: 'submit', text: 'Go'}));
  const d = ds.find((x) => String(x.id) === dict);
  if (!d) throw new Error(`no dictionary ${dict} in this database (it has ${ds.map((x) => x.id).join(', ')})`);
  const head = el('div', {class: 'stats'},
    d ? [el('span', {}, 'hook ', el('b', {text: d.hook_name})), el('span', {}, 'tokens analysed ', el('b', {text: fmt(d.n_tokens)})),
         el('span', {}, 'dead ', el('b', {text: fmt(d.dead)})), d.architecture ? el('span', {}, 'architecture ', el('b', {text: archText(d)})) : null,
         el('span', {}, el('a', {href: `/api/dict/${d.id}`, text: 'metrics (JSON)'}))] : []);
  main.replaceChildren(el('h1', {id: 'title', text: 'Features'}), form, head);
  if (st.token) {
    const r = await api(`/api/token?dict=${enc(dict)}&text=${enc(st.token)}&limit=50&offset=${st.token_offset}`);
    // the API returns a page of them and how many there are (it kept 50 without a word)
    const tlast = r.offset + r.features.length;
    main.append(el('h2', {text: `Features whose top activations fall on “${iso(st.token)}”`}),
      el('div', {class: 'controls'}, el('span', {id: 'token-count', text: r.total ? pageRange(r, tlast) : ''}),
        r.offset > 0 ? el('button', {type: 'button', id: 'token-prev', text: '← previous', onclick: () => go({token_offset: prevOffset(r)})}) : null,
        tlast < r.total ? el('button', {type: 'button', id: 'token-next', text: 'next →', onclick: () => go({token_offset: r.offset + r.limit})}) : null),
      r.features.length ? el('table', {id: 'token-table'}, el('tr', {}, ['feature', 'activations', 'max', 'density'].map((h) => el('th', {text: h}))),
        r.features.map((f) => el('tr', {}, el('td', {}, el('a', {href: `/feature/${dict}/${f.feature}`, text: '#' + f.feature})),
          el('td', {class: 'num', text: fmt(f.n)}), el('td', {class: 'num', text: fmt(f.max_value)}), el('td', {class: 'num', text: pct(f.density)}))))
        : el('p', {class: 'muted', text: 'none among the stored activations'}));
  }
  const u = new URLSearchParams({dict, sort: st.sort, order: st.order, offset: st.offset, limit: st.limit});
  if (st.q) u.set('q', st.q);
  if (st.tag) u.set('tag', st.tag);
  const r = await api('/api/features?' + u.toString());
  // measured effects (analyze --effects) as two more columns where the dictionary has them
  const eff = d && d.effects > 0;
  const cols = [['feature', 'feature'], ['density', 'density'], ['max_act', 'max act'], ['mean_act', 'mean act'],
                ['n_active', 'active'], ['precision', 'best POS (precision)'], ['nearest_cos', 'nearest (cos)'],
                ...(eff ? [['mean_kl', 'KL ablated'], ['mean_dloss', 'Δ loss ablated']] : []), [null, 'top tokens']];
  const th = cols.map(([k, label]) => el('th', {
    class: k ? 'sortable' + (k === st.sort ? ' sorted' + (st.order === 'asc' ? ' asc' : '') : '') : null, text: label,
    onclick: k ? () => go({sort: k, order: k === st.sort && st.order === 'desc' ? 'asc' : 'desc', offset: 0}) : null,
  }));
  const rows = r.features.map((f) => el('tr', {'data-feature': f.feature},
    el('td', {}, el('a', {href: `/feature/${dict}/${f.feature}`, text: '#' + f.feature})),
    el('td', {class: 'num', text: pct(f.density)}), el('td', {class: 'num', text: fmt(f.max_act)}),
    el('td', {class: 'num', text: fmt(f.mean_act)}), el('td', {class: 'num', text: fmt(f.n_active)}),
    el('td', {text: f.best_tag ? `${f.best_tag} (${pct(f.best_tag_precision)})` : '–'}),
    el('td', {}, f.nearest === null ? '–' : el('a', {href: `/feature/${dict}/${f.nearest}`, text: `#${f.nearest}`}), f.nearest === null ? '' : ` (${fmt(f.nearest_cos, 2)})`),
    eff ? [el('td', {class: 'num kl', text: fmt(f.mean_kl, 4)}), el('td', {class: 'num', text: fmt(f.mean_dloss, 4)})] : null,
    el('td', {}, (f.top_tokens || []).map((t) => el('span', {class: 'pill', text: shown(t)})))));
  const last = Math.min(r.offset + r.limit, r.total);
  const pager = el('div', {class: 'controls'},
    el('span', {id: 'count', text: (r.total ? pageRange(r, last) : '0–0 of 0 features') + (st.q ? ` matching “${iso(st.q)}”` : '')}),
    r.offset > 0 ? el('button', {type: 'button', id: 'prev', text: '← previous', onclick: () => go({offset: prevOffset(r)})}) : null,
    last < r.total ? el('button', {type: 'button', id: 'next', text: 'next →', onclick: () => go({offset: r.offset + r.limit})}) : null);
  main.append(pager, el('table', {id: 'features'}, el('tr', {}, th), rows));
}

// ---- feature page ---------------------------------------------------------------------------
function ctxLine(ex, maxv) {
  // every token of the window with its activation for this feature as the hover value and the
  // highlight strength: recomputed with the model when the server has it (4th element), else
  // the stored one (0 when none is stored at that token)
  return el('div', {class: 'ctx'}, el('span', {class: 'val', text: fmt(ex.value)}),
    ex.tokens.map(([t, stored, own, live]) => {
      const v = num(live === undefined ? stored : live);
      const a = maxv > 0 ? Math.min(1, v / maxv) : 0;
      const how = live === undefined ? (v > 0 ? 'stored' : 'none stored') : 'recomputed with the model';
      return el('span', {
        class: 'tok' + (v > 0 ? ' hot' : '') + (own ? ' max' : ''),
        style: v > 0 ? `background: rgba(var(--hot), ${(0.15 + 0.75 * a).toFixed(3)})` : null,
        title: `activation ${v > 0 ? v.toFixed(4) : '0'} (${how}) · seq ${ex.seq} pos ${ex.pos}`,
        'data-v': v, text: shown(t),
      });
    }));
}

function histogram(h) {
  if (!h.length) return el('p', {class: 'muted', text: 'never active'});
  // a damaged table (counts 0, NULL or text) must not give "height: NaN%"
  const m = Math.max(0, ...h.map((b) => (Number.isFinite(b.count) ? b.count : 0)));
  if (!(m > 0)) return el('p', {class: 'muted', id: 'hist-empty', text: 'no counts in the histogram (every bin is 0)'});
  return el('div', {},
    el('div', {class: 'bars', id: 'hist'}, h.map((b) => el('div', {style: `height: ${(100 * (Number.isFinite(b.count) ? b.count : 0) / m).toFixed(1)}%`, title: `[${fmt(b.lo)}, ${fmt(b.hi)}): ${b.count}`}))),
    el('div', {class: 'muted'}, `${fmt(h[0].lo)} … ${fmt(h[h.length - 1].hi)} (log-spaced bins, active values only)`));
}

let keyHandler = null;
let INFO = null;
async function viewFeature(dict, feat) {
  if (!INFO) INFO = await api('/api/info');
  // the stored activations first; then, when the server runs this dictionary's SAE, every
  // token's activation recomputed with the model replaces the shading (a slower request)
  const live = INFO.test && INFO.test_dict === dict;
  const j = await api(`/api/feature/${dict}/${feat}`);
  const f = j.feature, d = j.dict;
  const maxv = Number.isFinite(num(f.max_act)) ? num(f.max_act) : 0; // an Inf max scales nothing
  document.title = `#${feat} · ${iso(d.name)} · saelite`;
  const nav = el('div', {class: 'controls'},
    feat > 0 ? el('a', {id: 'prev-feature', href: `/feature/${dict}/${feat - 1}`, text: `← #${feat - 1}`}) : null,
    feat + 1 < f.d_sae ? el('a', {id: 'next-feature', href: `/feature/${dict}/${feat + 1}`, text: `#${feat + 1} →`}) : null,
    el('a', {href: `/?dict=${dict}`, text: 'all features'}),
    el('a', {href: `/api/feature/${dict}/${feat}`, text: 'JSON'}),
    el('span', {class: 'keys', text: '← → neighbours · n nearest'}));
  const stats = el('div', {class: 'stats', id: 'stats'},
    el('span', {}, 'density ', el('b', {text: pct(f.density)})), el('span', {}, 'active ', el('b', {text: `${fmt(f.n_active)} / ${fmt(f.n_tokens)}`})),
    el('span', {}, 'max ', el('b', {text: fmt(f.max_act)})), el('span', {}, 'mean ', el('b', {text: fmt(f.mean_act)})),
    f.best_tag ? el('span', {}, 'best POS ', el('b', {text: `${f.best_tag} ${pct(f.best_tag_precision)}`})) : null);
  const note = el('div', {class: 'muted', id: 'live-note', text: live
    ? 'Recomputing every token\'s activation with the model…'
    : 'The example\'s own token and other stored activations of this feature are shaded (start serve with --model and this SAE for every token).'});
  const top = el('div', {id: 'top'}), bands = el('div', {id: 'bands'});
  const fill = (k) => {
    top.replaceChildren(...(k.top.length ? k.top.map((ex) => ctxLine(ex, maxv)) : [el('p', {class: 'muted', text: 'no stored activations'})]));
    bands.replaceChildren(...k.bands.map((b) => el('div', {},
      el('div', {class: 'muted', text: `quantile band ${b.interval} (${b.examples.length} samples)`}), b.examples.map((ex) => ctxLine(ex, maxv)))));
  };
  fill(j);
  const lpos = j.logits.filter((l) => l.sign > 0), lneg = j.logits.filter((l) => l.sign < 0);
  const lmax = Math.max(1e-9, ...j.logits.map((l) => Math.abs(l.value)));
  const logitList = (ls, neg) => el('table', {}, ls.map((l) => el('tr', {},
    el('td', {}, el('span', {class: 'pill', text: shown(l.text || '#' + l.token)})),
    el('td', {class: 'num'}, el('span', {class: 'hbar' + (neg ? ' neg' : ''), style: `width: ${(60 * Math.abs(l.value) / lmax).toFixed(0)}px`}), fmt(l.value)))));
  // the measured effect of ablating the feature where it fires (analyze --effects), its
  // promoted / suppressed tokens beside the direct-path value of the same token
  const e = j.effect;
  const epos = j.effect_logits.filter((l) => l.sign > 0), eneg = j.effect_logits.filter((l) => l.sign < 0);
  const emax = Math.max(1e-9, ...j.effect_logits.map((l) => Math.abs(l.value)));
  const effList = (ls, neg) => el('table', {class: 'effect-logits'}, el('tr', {}, el('th', {text: neg ? 'suppressed' : 'promoted'}), el('th', {text: 'measured Δ log p'}), el('th', {text: 'direct'})),
    ls.map((l) => el('tr', {}, el('td', {}, el('span', {class: 'pill', text: shown(l.text || '#' + l.token)})),
      el('td', {class: 'num'}, el('span', {class: 'hbar' + (neg ? ' neg' : ''), style: `width: ${(60 * Math.abs(l.value) / emax).toFixed(0)}px`}), fmt(l.value, 4)),
      el('td', {class: 'num muted', title: 'direct-path logit effect of the same token (ana_logits), where it is among the top ones', text: l.direct === null ? '–' : fmt(l.direct)}))));
  const effect = e ? el('div', {id: 'effect'},
    el('div', {class: 'stats'}, el('span', {}, 'KL ', el('b', {id: 'effect-kl', text: fmt(e.mean_kl, 5)})), el('span', {}, 'Δ loss ', el('b', {id: 'effect-dloss', text: fmt(e.mean_dloss, 5)})),
      el('span', {}, 'contexts ', el('b', {text: fmt(e.n_contexts)})), el('span', {}, 'rank corr. with direct path ', el('b', {text: fmt(e.rank_corr, 3)}))),
    el('div', {class: 'muted', text: 'Mean over the contexts where it fires of KL(clean ‖ ablated) and of the next token\'s loss change, ablating x − f·d at the hook (nats).'}),
    el('div', {class: 'grid'}, effList(epos, false), effList(eneg, true)))
    : el('p', {class: 'muted', id: 'effect-none', text: 'not measured (saelite analyze --effects writes it)'});
  const ptot = j.pos.reduce((s, p) => s + (Number.isFinite(p.n) ? p.n : 0), 0);
  const share = (n) => (ptot > 0 && Number.isFinite(n) ? n / ptot : null); // null: '–', not NaN
  const pos = j.pos.length ? el('table', {id: 'pos'}, j.pos.map((p) => el('tr', {}, el('td', {text: p.tag}),
    el('td', {}, el('span', {class: 'hbar', style: `width: ${(120 * (share(p.n) || 0)).toFixed(0)}px`}), `${fmt(p.n)} (${pct(share(p.n))})`))))
    : el('p', {class: 'muted', text: 'no POS tags stored for its top activations'});
  const near = j.nearest.length ? el('div', {id: 'nearest'}, j.nearest.map((n) => el('a', {class: 'pill', href: `/feature/${dict}/${n.feature}`, text: `#${n.feature} ${fmt(n.cos, 3)}`})))
    : el('p', {class: 'muted', text: 'no decoder directions stored'});
  const metrics = el('table', {}, j.metrics.filter((m) => /^(mse|explained_variance|l0|dead_frac|ce_loss_score|kl_score|matryoshka_prefix_\d+_ev)$/.test(m.name))
    .map((m) => el('tr', {}, el('td', {text: m.name}), el('td', {class: 'num', text: fmt(m.value, 4)}))));
  const run = el('div', {class: 'stats'}, el('span', {}, 'dictionary ', el('b', {text: d.name})), el('span', {}, 'hook ', el('b', {text: d.hook_name})),
    d.architecture ? el('span', {}, 'trained ', el('b', {text: `${archText(d)}, ${fmt(d.train_tokens)} tokens`})) : null,
    d.eval_ev !== null && d.eval_ev !== undefined ? el('span', {}, 'eval EV ', el('b', {text: fmt(d.eval_ev, 4)})) : null);
  main.replaceChildren(el('h1', {id: 'title', text: `Feature #${feat}`}), el('div', {class: 'muted', text: dictName(d)}), nav, stats,
    el('h2', {text: 'Top activations'}), note, top,
    el('div', {class: 'grid'},
      el('div', {}, el('h2', {text: 'Activation histogram'}), histogram(j.hist)),
      el('div', {}, el('h2', {text: 'Logit effects (direct path)'}), el('div', {class: 'grid', id: 'logits'}, logitList(lpos, false), logitList(lneg, true)))),
    el('h2', {text: 'Measured effect (ablation)'}), effect,
    el('div', {class: 'grid'},
      el('div', {}, el('h2', {text: 'POS tags of the top activations'}), pos),
      el('div', {}, el('h2', {text: 'Nearest features (decoder cosine)'}), near)),
    steerPanel(dict, feat, maxv),
    el('h2', {text: 'Quantile bands'}), bands,
    el('div', {id: 'dashboard-section'}, j.dashboard ? [el('h2', {text: 'Dashboard (saelite report)'}),
      el('a', {href: j.dashboard, target: '_blank'}, el('img', {id: 'dashboard', class: 'dashboard', src: j.dashboard, alt: `report dashboard of feature #${feat}`}))] : null),
    el('h2', {text: 'Dictionary and training run'}), run, metrics);
  keyHandler = (e) => {
    if (e.target.closest('input, textarea, select')) return;
    if (e.key === 'ArrowLeft' && feat > 0) navigate(`/feature/${dict}/${feat - 1}`);
    else if (e.key === 'ArrowRight' && feat + 1 < f.d_sae) navigate(`/feature/${dict}/${feat + 1}`);
    else if (e.key === 'n' && j.nearest.length) navigate(`/feature/${dict}/${j.nearest[0].feature}`);
    else return;
    e.preventDefault();
  };
  if (live) {
    try {
      const k = await api(`/api/feature/${dict}/${feat}?live=1`);
      if (location.pathname === `/feature/${dict}/${feat}`) {
        fill(k);
        note.textContent = 'Every token shaded by its activation recomputed with the model and the SAE (hover for values).';
      }
    } catch (e) { if (!e.stale) note.textContent = 'Recomputing with the model failed: ' + e.message; }
  }
}

// ---- steering (on the feature page) ---------------------------------------------------------
// The prompt continued twice from the same seed, with this feature steered and without, side
// by side (POST /api/steer: the server runs what `saelite generate --steer --compare` runs).
function steerPanel(dict, feat, maxv) {
  if (!INFO.steering || INFO.test_dict !== dict)
    return el('div', {id: 'steer'}, el('h2', {text: 'Steering'}),
      el('p', {class: 'muted', id: 'steer-off', text: 'Start serve with --model DIR and this dictionary\'s SAE (--sae) to steer with this feature.'}));
  const lim = Math.max(10, Math.ceil(4 * (maxv || 1)));
  const prompt = el('textarea', {id: 'steer-prompt', placeholder: 'A prompt to continue (empty: from <|endoftext|>)', maxlength: INFO.steer_max_prompt});
  prompt.value = 'The';
  const num = el('input', {id: 'steer-strength', type: 'number', step: 'any', value: (2 * (maxv || 1)).toFixed(2), size: 7});
  const slider = el('input', {id: 'steer-slider', type: 'range', min: -lim, max: lim, step: lim / 100, value: num.value});
  slider.addEventListener('input', () => { num.value = slider.value; });
  num.addEventListener('input', () => { slider.value = num.value; });
  const method = el('select', {id: 'steer-method'}, [['add', 'add S·d'], ['clamp', 'clamp to S'], ['ortho', 'scale along d by S'], ['cap', 'cap projection at S']]
    .map(([v, t]) => el('option', {value: v, text: t})));
  const ntok = el('input', {id: 'steer-tokens', type: 'number', min: 1, max: INFO.steer_max_tokens, value: 24, size: 4});
  const seed = el('input', {id: 'steer-seed', type: 'number', min: 0, value: 0, size: 6});
  const temp = el('input', {id: 'steer-temp', type: 'number', min: 0, max: 10, step: 'any', value: 1, size: 4});
  const out = el('div', {id: 'steer-out'});
  const col = (id, title, r, other) => el('div', {class: 'steer-col', id},
    el('div', {class: 'muted', text: title}),
    el('div', {class: 'ctx'}, el('span', {class: 'prompt', text: shown(prompt.value)}),
      r.tokens.map((t, i) => el('span', {class: 'tok gen' + (other && other.ids[i] !== r.ids[i] ? ' diff' : ''), title: `token ${r.ids[i]}`, text: shown(t)}))),
    el('div', {class: 'muted', text: `${r.tokens.length} tokens, stopped: ${r.stop}`}));
  const run = async () => {
    out.replaceChildren(el('p', {class: 'muted', text: 'generating…'}));
    const body = {prompt: prompt.value, features: [[feat, +num.value]], method: method.value,
                  max_tokens: +ntok.value, seed: +seed.value, temperature: +temp.value};
    try {
      const r = await api('/api/steer', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)});
      out.replaceChildren(el('div', {class: 'grid'},
        col('steer-steered', `steered: #${feat} ${r.method} ${fmt(r.features[0][1])}`, r.steered, r.unsteered),
        col('steer-unsteered', 'unsteered (same seed)', r.unsteered, null)),
        el('div', {class: 'muted', id: 'steer-note', text: `${r.prompt_tokens} prompt tokens, seed ${r.seed}, temperature ${r.temperature}, at ${r.hook}; ${fmt(r.ms, 0)} ms. Tokens that differ from the unsteered run are marked.`}));
    } catch (e) { if (e.stale) return; out.replaceChildren(el('p', {class: 'error', id: 'error', text: e.message})); }
    document.body.dataset.ready = '1';
  };
  return el('div', {id: 'steer'}, el('h2', {text: 'Steering'}), prompt,
    el('div', {class: 'controls'}, el('label', {}, 'strength ', num), slider, el('label', {}, 'method ', method),
      el('label', {}, 'tokens ', ntok), el('label', {}, 'seed ', seed), el('label', {}, 'temperature ', temp),
      el('button', {id: 'steer-run', type: 'button', text: 'Steer', onclick: run})), out);
}

// ---- input from the URL ---------------------------------------------------------------------
// /sql?sql= and /test?text= run their input when the view opens, so a link on another site to
// them would make serve run it (the API refuses requests other sites make, not the page's own).
// The server marks a page that another site opened (Server-Timing "xsite" on that navigation;
// see serve/http.c); then, and where the browser does not say (no serverTiming), the first view
// waits for Run. Views opened inside the page (links, back) run as before.
let routes = 0; // route() calls so far: 1 while the first view (the page load's) opens
function mayAutoRun() {
  if (routes > 1) return true;
  const n = performance.getEntriesByType && performance.getEntriesByType('navigation')[0];
  return !!(n && Array.isArray(n.serverTiming) && !n.serverTiming.some((t) => t.name === 'xsite'));
}
const autoRunNote = () => el('p', {class: 'muted', id: 'autorun-note', text: 'Opened from a link: press Run to run it.'});

// ---- test your text -------------------------------------------------------------------------
async function viewTest(params) {
  const info = await api('/api/info');
  main.replaceChildren(el('h1', {id: 'title', text: 'Test your text'}));
  if (!info.test) {
    main.append(el('p', {class: 'muted', id: 'test-off', text: 'Start the server with --model DIR (and --sae) to run text through the model and the SAE.'}));
    return;
  }
  const ta = el('textarea', {id: 'text', placeholder: 'Type a sentence…'});
  ta.value = params.get('text') || '';
  const out = el('div', {id: 'test-out'});
  const run = async () => {
    const text = ta.value;
    if (!text.trim()) return;
    history.replaceState(null, '', '/test?' + new URLSearchParams({text}).toString());
    out.replaceChildren(el('p', {class: 'muted', text: 'running…'}));
    try {
      const r = await api('/api/test', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify({text, k: 5})});
      out.replaceChildren(
        el('p', {class: 'muted', text: `${r.tokens.length} tokens through ${r.hook}` + (r.truncated ? ` (cut to ${info.test_max_tokens})` : '') + (r.dict_id < 0 ? ' — this SAE is not analysed in the database: no feature pages' : '')}),
        el('div', {}, r.tokens.map((t) => el('span', {class: 'testtok'}, el('span', {class: 't', text: shown(t.text)}),
          t.features.map(([f, v]) => r.dict_id >= 0 ? el('a', {href: `/feature/${r.dict_id}/${f}`, title: `activation ${fmt(v, 4)}`, text: `#${f} ${fmt(v, 2)}`})
            : el('span', {text: `#${f} ${fmt(v, 2)}`}))))));
    } catch (e) { if (e.stale) return; out.replaceChildren(el('p', {class: 'error', id: 'error', text: e.message})); }
    document.body.dataset.ready = '1';
  };
  main.append(el('p', {class: 'muted', text: `SAE ${info.test_sae}; each token shows its top 5 features (click one to open it).`}), ta,
    el('div', {class: 'controls'}, el('button', {id: 'run', type: 'button', text: 'Run', onclick: run}), el('span', {class: 'keys', text: 'Ctrl-Enter runs'})), out);
  ta.addEventListener('keydown', (e) => { if (e.key === 'Enter' && e.ctrlKey) run(); });
  if (ta.value && mayAutoRun()) await run();
  else if (ta.value) out.replaceChildren(autoRunNote());
}

// ---- SQL console ----------------------------------------------------------------------------
async function viewSql(params) {
  const info = await api('/api/info');
  const ta = el('textarea', {id: 'sql'});
  ta.value = params.get('sql') || "SELECT dictionary, metric, value FROM sae_metrics_view LIMIT 20";
  const out = el('div', {id: 'sql-out'});
  const run = async () => {
    history.replaceState(null, '', '/sql?' + new URLSearchParams({sql: ta.value}).toString());
    try {
      const r = await api('/api/sql', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify({sql: ta.value})}, true);
      out.replaceChildren(el('p', {class: 'muted', id: 'sql-count', text: `${r.rows.length} rows` + (r.truncated ? ` (stopped at ${r.max_rows})` : '')}),
        el('table', {id: 'sql-table'}, el('tr', {}, r.columns.map((c) => el('th', {text: c}))),
          r.rows.map((row) => el('tr', {}, row.map((v) => {
            const n = typeof v === 'number' || typeof v === 'bigint' || isInf(v);
            return el('td', {class: n ? 'num' : null, text: v === null ? 'NULL' : n ? fmt(v, 4) : v});
          })))));
    } catch (e) { if (e.stale) return; out.replaceChildren(el('p', {class: 'error', id: 'error', text: e.message})); }
    document.body.dataset.ready = '1';
  };
  main.replaceChildren(el('h1', {id: 'title', text: 'SQL'}),
    el('p', {class: 'muted', text: `Read-only, one statement, at most ${info.sql_max_rows} rows and ${info.sql_timeout_ms / 1000} s; the saelite functions tok_text, context, vec_cos, … are there (docs/analysis.md).`}),
    ta, el('div', {class: 'controls'}, el('button', {id: 'run', type: 'button', text: 'Run', onclick: run}), el('span', {class: 'keys', text: 'Ctrl-Enter runs'})), out);
  ta.addEventListener('keydown', (e) => { if (e.key === 'Enter' && e.ctrlKey) run(); });
  if (params.get('sql') && mayAutoRun()) await run();
  else if (params.get('sql')) out.replaceChildren(autoRunNote());
}

// ---- routing --------------------------------------------------------------------------------
const enc = encodeURIComponent;
function navigate(url) { history.pushState(null, '', url); route(); }

async function route() {
  keyHandler = null;
  const gen = ++routes;
  const p = location.pathname, params = new URLSearchParams(location.search);
  for (const a of document.querySelectorAll('header nav a')) a.classList.toggle('active', a.getAttribute('href') === p);
  try {
    let m;
    if ((m = p.match(/^\/feature\/(\d+)\/(\d+)$/))) await viewFeature(+m[1], +m[2]);
    else if (p.startsWith('/feature/')) throw new Error(`no feature page ${p} (expected /feature/DICT/N)`);
    else if (p === '/test') await viewTest(params);
    else if (p === '/sql') await viewSql(params);
    else await viewIndex(params);
    if (gen === routes) document.body.dataset.ready = '1';
  } catch (e) {
    if (e.stale || gen !== routes) return;
    showError(e); document.body.dataset.ready = 'error';
  }
}

document.addEventListener('click', (e) => {
  const a = e.target.closest('a');
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey || a.target) return;
  const u = new URL(a.href, location.href);
  if (u.origin !== location.origin || u.pathname.startsWith('/api/')) return;
  e.preventDefault();
  navigate(u.pathname + u.search);
});
document.addEventListener('keydown', (e) => {
  if (e.key === '/' && !e.target.closest('input, textarea')) {
    const q = document.getElementById('q');
    if (q) { e.preventDefault(); q.focus(); } else navigate('/');
    return;
  }
  if (keyHandler) keyHandler(e);
});
window.addEventListener('popstate', route);

api('/api/info').then((i) => {
  document.getElementById('dbinfo').textContent = `${i.path} · ${i.db.dicts} dictionaries · search ${i.search}` + (i.test ? ' · test on' : '');
}).catch(() => {});
route();
