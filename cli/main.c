/* main.c - the saelite command dispatcher.
 *
 * The command table is generated from the CLI_COMMAND lines of cli/cmd_*.c (see cli.h) into
 * build/gen/commands.h, sorted by name; help is generated from it.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

#define X(id)                                                                                 \
    int cmd_##id(int argc, char **argv);                                                      \
    extern const char cmd_##id##_summary[];                                                   \
    extern const char cmd_##id##_usage[];
#include "commands.h"
#undef X

typedef struct {
    char name[32];
    int (*fn)(int, char **);
    const char *summary;
    const char *usage;
} command;

#define X(id) {#id, cmd_##id, cmd_##id##_summary, cmd_##id##_usage},
static command commands[] = {
#include "commands.h"
};
#undef X
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void fix_names(void)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        for (char *c = commands[i].name; *c; c++)
            if (*c == '_') *c = '-';
}

static const command *find(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(commands[i].name, name)) return &commands[i];
    return NULL;
}

const char *cli_usage_of(const char *cmd)
{
    const command *c = find(cmd);
    return c ? c->usage : NULL;
}

static int print_help(const char *cmd)
{
    if (cmd) {
        const command *c = find(cmd);
        if (!c) {
            fprintf(stderr, "saelite: unknown command '%s' (see 'saelite help')\n", cmd);
            return 2;
        }
        char *argv[] = {(char *)c->name, "--help", NULL};
        return c->fn(2, argv) < 0 ? 0 : 0;
    }
    printf("saelite %s - sparse autoencoders for transformer interpretability\n\n", SAELITE_VERSION);
    printf("usage: saelite <command> [options]   (saelite help <command> for details)\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        printf("  %-12s %s\n", commands[i].name, commands[i].summary);
    return 0;
}

int main(int argc, char **argv)
{
    fix_names();
    int rc;
    if (argc < 2) {
        print_help(NULL);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "help") || !strcmp(name, "--help") || !strcmp(name, "-h"))
        rc = print_help(argc > 2 ? argv[2] : NULL);
    else if (!strcmp(name, "--version") || !strcmp(name, "version")) {
        printf("saelite %s\n", SAELITE_VERSION);
        rc = 0;
    } else {
        const command *c = find(name);
        if (!c) {
            fprintf(stderr, "saelite: unknown command '%s' (see 'saelite help')\n", name);
            return 2;
        }
        rc = c->fn(argc - 1, argv + 1);
        if (rc < 0) rc = 0; /* --help */
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("saelite: writing output");
        return 1;
    }
    return rc;
}
