/* png.c - PNG files with libpng: atomic writer with text chunks, and a reader for tests/tools. */
#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "reports/rep_internal.h"

/* libpng reports errors through a callback that must not return: record the message and
 * longjmp back to the setjmp in the caller (png_jmpbuf). */
typedef struct { char msg[256]; } png_errctx;

static void on_png_error(png_structp png, png_const_charp msg)
{
    png_errctx *e = png_get_error_ptr(png);
    if (e) snprintf(e->msg, sizeof e->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg) { (void)png; (void)msg; }

static int is_ascii(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s >= 0x80 || ((unsigned char)*s < 0x20 && *s != '\n')) return 0;
    return 1;
}

int rep_png_write(const rep_canvas *c, const char *path, const rep_kv *meta, int nmeta)
{
    int rc = rep_canvas_status(c);
    if (rc) return err_wrap(rc, "%s", path);
    for (int i = 0; i < nmeta; i++) {
        size_t kl = meta[i].key ? strlen(meta[i].key) : 0;
        if (kl < 1 || kl > 79 || !meta[i].value)
            return err_set(ERR_ARG, "%s: PNG text key #%d must be 1-79 characters with a value",
                           path, i);
    }
    cairo_surface_flush(c->surf);
    const unsigned char *data = cairo_image_surface_get_data(c->surf);
    int stride = cairo_image_surface_get_stride(c->surf), w = c->w, h = c->h;

    /* Opaque canvases (the usual case) are written as RGB: a quarter smaller, faster. */
    int opaque = 1;
    for (int y = 0; y < h && opaque; y++) {
        const uint32_t *row = (const uint32_t *)(data + (size_t)y * stride);
        for (int x = 0; x < w; x++)
            if ((row[x] >> 24) != 255) { opaque = 0; break; }
    }
    int ch = opaque ? 3 : 4;

    unsigned char *rowbuf = mem_alloc((size_t)w * 4);
    png_text *texts = mem_calloc((size_t)(nmeta > 0 ? nmeta : 1), sizeof(png_text));
    if (!rowbuf || !texts) {
        mem_free(rowbuf); mem_free(texts);
        return err_set(ERR_NOMEM, "%s: out of memory", path);
    }
    file_atomic out;
    if ((rc = file_atomic_open(&out, path))) {
        mem_free(rowbuf); mem_free(texts);
        return rc;
    }
    FILE *f = out.f;

    png_errctx ectx = {{0}};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &ectx, on_png_error,
                                              on_png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_write_struct(&png, &info);
        file_atomic_abort(&out);
        mem_free(rowbuf); mem_free(texts);
        return err_set(ERR_NOMEM, "%s: libpng: out of memory", path);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        file_atomic_abort(&out);
        rc = err_set(ERR_PNG, "%s: libpng: %s", path, ectx.msg[0] ? ectx.msg : "write failed");
        mem_free(rowbuf); mem_free(texts);
        return rc;
    }
    png_init_io(png, f);
    /* Encoding dominates the cost of a dashboard (drawing is ~10%). These pictures are mostly
     * flat colour, where zlib level 1 without PNG row filters is ~3x faster than libpng's
     * defaults (level 6, adaptive filters) for files about 1.6x larger (~40 KB a dashboard);
     * measured in bench/bench_report.c. */
    png_set_compression_level(png, 1);
    png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_NONE);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8,
                 opaque ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_RGB_ALPHA, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    for (int i = 0; i < nmeta; i++) {
        texts[i].key = (png_charp)meta[i].key;
        texts[i].text = (png_charp)meta[i].value;
        if (is_ascii(meta[i].value)) {
            texts[i].compression = PNG_TEXT_COMPRESSION_NONE;
            texts[i].text_length = strlen(meta[i].value);
        } else {
            texts[i].compression = PNG_ITXT_COMPRESSION_NONE;
            texts[i].itxt_length = strlen(meta[i].value);
            texts[i].lang = (png_charp) "";
            texts[i].lang_key = (png_charp) "";
        }
    }
    if (nmeta > 0) png_set_text(png, info, texts, nmeta);
    png_write_info(png, info);
    for (int y = 0; y < h; y++) {
        const uint32_t *row = (const uint32_t *)(data + (size_t)y * stride);
        unsigned char *o = rowbuf;
        for (int x = 0; x < w; x++) {
            uint32_t p = row[x];
            unsigned a = p >> 24, r = (p >> 16) & 255, g = (p >> 8) & 255, b = p & 255;
            if (a != 255 && a) { /* cairo stores premultiplied alpha */
                r = (r * 255 + a / 2) / a;
                g = (g * 255 + a / 2) / a;
                b = (b * 255 + a / 2) / a;
            }
            o[0] = (unsigned char)r; o[1] = (unsigned char)g; o[2] = (unsigned char)b;
            if (ch == 4) o[3] = (unsigned char)a;
            o += ch;
        }
        png_write_row(png, rowbuf);
    }
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    mem_free(rowbuf);
    mem_free(texts);
    return file_atomic_commit(&out);
}

void rep_image_free(rep_image *img)
{
    if (!img) return;
    mem_free(img->rgba);
    for (int i = 0; i < img->nmeta; i++) {
        mem_free((char *)img->meta[i].key);
        mem_free((char *)img->meta[i].value);
    }
    mem_free(img->meta);
    memset(img, 0, sizeof *img);
}

const char *rep_image_meta(const rep_image *img, const char *key)
{
    for (int i = 0; i < img->nmeta; i++)
        if (!strcmp(img->meta[i].key, key)) return img->meta[i].value;
    return NULL;
}

/* rep_png_read (pixels != 0) and rep_png_read_meta (the chunks before the image data only)
 * from f at its start (path for messages); f stays open. */
static int png_read_stream(FILE *f, const char *path, rep_image *out, int pixels)
{
    memset(out, 0, sizeof *out);
    unsigned char sig[8];
    if (fread(sig, 1, 8, f) != 8 || png_sig_cmp(sig, 0, 8))
        return err_set(ERR_FORMAT, "%s: not a PNG file", path);
    png_errctx ectx = {{0}};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &ectx, on_png_error,
                                             on_png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_read_struct(&png, &info, NULL);
        return err_set(ERR_NOMEM, "%s: libpng: out of memory", path);
    }
    unsigned char *volatile rgba = NULL;
    png_bytep *volatile rows = NULL;
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        mem_free(rgba);
        mem_free(rows);
        rep_image_free(out);
        return err_set(ERR_FORMAT, "%s: libpng: %s", path, ectx.msg[0] ? ectx.msg : "read failed");
    }
    png_init_io(png, f);
    png_set_sig_bytes(png, 8);
    png_set_user_limits(png, 32767, 32767);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    if (!pixels) goto text; /* the text chunks saelite writes come before IDAT */
    int ct = png_get_color_type(png, info), bd = png_get_bit_depth(png, info);
    /* Normalise everything to 8-bit RGBA. */
    if (bd == 16) png_set_strip_16(png);
    if (ct == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (ct == PNG_COLOR_TYPE_GRAY && bd < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
    if (ct == PNG_COLOR_TYPE_GRAY || ct == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    if (!(ct & PNG_COLOR_MASK_ALPHA)) png_set_filler(png, 0xff, PNG_FILLER_AFTER);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    rgba = mem_alloc((size_t)w * h * 4);
    rows = mem_alloc(sizeof(png_bytep) * (h ? h : 1));
    if (!rgba || !rows) png_error(png, "out of memory");
    for (png_uint_32 y = 0; y < h; y++) rows[y] = rgba + (size_t)y * w * 4;
    png_read_image(png, rows);
    mem_free(rows);
    rows = NULL;
    png_read_end(png, info);
text:;
    png_textp text = NULL;
    int nt = 0;
    png_get_text(png, info, &text, &nt);
    if (nt > 0) {
        out->meta = mem_calloc((size_t)nt, sizeof(rep_kv));
        if (!out->meta) png_error(png, "out of memory");
        for (int i = 0; i < nt; i++) {
            out->meta[i].key = mem_strdup(text[i].key);
            out->meta[i].value = mem_strdup(text[i].text ? text[i].text : "");
            out->nmeta = i + 1;
            if (!out->meta[i].key || !out->meta[i].value) png_error(png, "out of memory");
        }
    }
    png_destroy_read_struct(&png, &info, NULL);
    out->width = (int)w;
    out->height = (int)h;
    out->rgba = rgba;
    return OK;
}

static int png_read_file(const char *path, rep_image *out, int pixels)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int rc = png_read_stream(f, path, out, pixels);
    fclose(f);
    return rc;
}

int rep_png_read(const char *path, rep_image *out) { return png_read_file(path, out, 1); }
int rep_png_read_meta(const char *path, rep_image *out) { return png_read_file(path, out, 0); }

int rep_png_has_key(const char *path, const char *key, const char *want)
{
    /* what rep_png_write ends every file with: IEND's empty chunk and its CRC */
    static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
    FILE *f = NULL;
    int64_t size = 0;
    int same = 0;
    if (file_open_plain_read(path, &f, &size) || !f) {
        err_clear(); /* nothing there, or not a plain file: draw it (the rename replaces it) */
        return 0;
    }
    unsigned char tail[12];
    rep_image img;
    if (size >= 8 + 12 && !fseek(f, -12, SEEK_END) && fread(tail, 1, 12, f) == 12 &&
        !memcmp(tail, iend, 12) && !fseek(f, 0, SEEK_SET) && !png_read_stream(f, path, &img, 0)) {
        const char *v = rep_image_meta(&img, key);
        same = v && !strcmp(v, want);
        rep_image_free(&img);
    }
    err_clear();
    fclose(f);
    return same;
}
