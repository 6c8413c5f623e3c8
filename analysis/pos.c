/* pos.c - part-of-speech alignment: tags of tokens from tagged byte spans, tag distributions. */
#include <string.h>

#include "analysis/ana.h"

void ana_token_tags(int *out, const size_t *tok_start, int n_tok, const char *text,
                    size_t text_len, const size_t *span_start, const size_t *span_end,
                    const int *span_tag, int n_spans)
{
    int s = 0; /* spans and tokens both ascend: one merge pass */
    for (int i = 0; i < n_tok; i++) {
        size_t b = tok_start[i], e = i + 1 < n_tok ? tok_start[i + 1] : text_len;
        /* GPT-2 tokens carry the preceding space; the word starts at the first non-space */
        if (text)
            while (b < e && (text[b] == ' ' || text[b] == '\n' || text[b] == '\t' || text[b] == '\r'))
                b++;
        if (b >= e && text) {
            out[i] = -1;
            continue;
        }
        while (s < n_spans && span_end[s] <= b) s++;
        out[i] = (s < n_spans && span_start[s] <= b && b < span_end[s]) ? span_tag[s] : -1;
    }
}

int ana_tag_dist(int64_t *counts, int ntags, const int *tags, int n, double *precision)
{
    memset(counts, 0, (size_t)ntags * sizeof *counts);
    int64_t tagged = 0;
    for (int i = 0; i < n; i++)
        if (tags[i] >= 0 && tags[i] < ntags) {
            counts[tags[i]]++;
            tagged++;
        }
    int best = -1;
    for (int t = 0; t < ntags; t++)
        if (counts[t] > 0 && (best < 0 || counts[t] > counts[best])) best = t;
    *precision = best >= 0 ? (double)counts[best] / (double)tagged : 0.0;
    return best;
}
