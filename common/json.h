/* json.h - one JSON object read from a file's text, refusing what would make it mean two things.
 *
 * cJSON (the parser every reader uses) stops at the end of the first value, so text after it
 * was dropped without a word; it keeps every copy of a repeated key where its lookups take the
 * first (json.loads and JSON.parse keep the last); and it stops at a NUL byte. The readers of
 * encoder.json, config.json, cfg.json, generator specs and safetensors headers go through
 * json_parse_object, which refuses all three and places a syntax error by line and column. It
 * is not a validator: cJSON still takes some texts json.loads refuses (a leading zero, a raw
 * control byte inside a string). json_read_object_file reads the file (file_read_text, at most
 * max bytes) and parses it. The caller owns *out (cJSON_Delete). Errors: ERR_FORMAT naming path
 * (and `what` the file is meant to be, or NULL), file_read_text's, ERR_NOMEM. Thread-safe (no
 * cJSON global state is read).
 */
#ifndef SAELITE_JSON_H
#define SAELITE_JSON_H
#include <stddef.h>

typedef struct cJSON cJSON;

int json_parse_object(const char *path, const char *what, const char *text, size_t len, cJSON **out);
int json_read_object_file(const char *path, const char *what, size_t max, cJSON **out);

#endif
