/* json.h - one JSON object read from a file's text, as strictly as Python's json.loads reads it.
 *
 * cJSON (the parser every reader uses) stops at the end of the first value, so text after it
 * was dropped without a word, and it keeps every copy of a repeated key where its lookups take
 * the first (json.loads and JSON.parse keep the last: the same file meant two things). The
 * readers of encoder.json, config.json, cfg.json, generator specs and safetensors headers go
 * through json_parse_object, which refuses both and places a syntax error by line and column.
 * The caller owns *out (cJSON_Delete). Errors: ERR_FORMAT naming path (and `what` the file is
 * meant to be, or NULL), ERR_NOMEM. Thread-safe (no cJSON global state is read).
 */
#ifndef SAELITE_JSON_H
#define SAELITE_JSON_H
#include <stddef.h>

typedef struct cJSON cJSON;

int json_parse_object(const char *path, const char *what, const char *text, size_t len, cJSON **out);

#endif
