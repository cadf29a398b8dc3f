/* args.c -- the option parser shared by the subcommands, and the names they accept. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

args_opt *args_find(args_opt *opts, int n_opts, const char *name)
{
    for (int i = 0; i < n_opts; i++)
        if (strcmp(opts[i].name, name) == 0)
            return &opts[i];
    return NULL;
}

int args_refuse(const char *cmd, args_opt *opts, int n_opts, const char *const *names,
                size_t n_names, const char *why)
{
    for (size_t i = 0; i < n_names; i++) {
        const args_opt *o = args_find(opts, n_opts, names[i]);
        if (o && o->given)
            return cli_usage(cmd, "--%s: %s", names[i], why);
    }
    return CLI_OK;
}

/* Parses a finite double that fills the whole word. */
static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v) || errno == ERANGE)
        return -1;
    *out = v;
    return 0;
}

/* Parses a decimal int64 that fills the whole word. */
static int parse_int(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE)
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* Stores text as the value of opt. */
static int store(const char *cmd, args_opt *opt, const char *text)
{
    switch (opt->kind) {
    case ARGS_STRING: *(const char **)opt->value = text; break;
    case ARGS_DOUBLE:
        if (parse_double(text, opt->value) != 0)
            return cli_usage(cmd, "--%s: '%s' is not a finite number", opt->name, text);
        break;
    case ARGS_INT: {
        int64_t v;
        if (parse_int(text, &v) != 0)
            return cli_usage(cmd, "--%s: '%s' is not an integer", opt->name, text);
        if (v < opt->min)
            return cli_usage(cmd, "--%s: %lld is out of range (it must be >= %lld)", opt->name,
                             (long long)v, (long long)opt->min);
        *(int64_t *)opt->value = v;
        break;
    }
    case ARGS_FLAG: *(int *)opt->value = 1; break;
    }
    opt->given = 1;
    return CLI_OK;
}

int args_parse(const char *cmd, int argc, char **argv, args_opt *opts, int n_opts,
               const char *usage, int *done)
{
    *done = 0;
    for (int i = 0; i < argc; i++) {
        const char *word = argv[i];
        if (strcmp(word, "-h") == 0 || strcmp(word, "--help") == 0) {
            fputs(usage, stdout);
            *done = 1;
            return CLI_OK;
        }
        if (strncmp(word, "--", 2) != 0 || word[2] == '\0')
            return cli_usage(cmd, "unexpected argument '%s'", word);
        /* "--name=value" or "--name value" */
        const char *name = word + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        args_opt *opt = NULL;
        for (int k = 0; k < n_opts; k++)
            if (strlen(opts[k].name) == len && strncmp(opts[k].name, name, len) == 0)
                opt = &opts[k];
        if (!opt)
            return cli_usage(cmd, "unknown option '--%.*s'", (int)len, name);
        const char *text = NULL;
        if (opt->kind == ARGS_FLAG) {
            if (eq)
                return cli_usage(cmd, "--%s takes no value", opt->name);
        } else if (eq) {
            text = eq + 1;
        } else {
            if (i + 1 >= argc)
                return cli_usage(cmd, "--%s needs a value", opt->name);
            text = argv[++i];
        }
        int rc = store(cmd, opt, text);
        if (rc != CLI_OK)
            return rc;
    }
    return CLI_OK;
}

int args_kernel(const char *cmd, const char *name, fmk_kernel *kernel)
{
    if (fmk_kernel_from_name(name, kernel) != FMK_OK)
        return cli_usage(cmd,
                         "--kernel: unknown kernel '%s' (laplace, plummer, regularized, "
                         "log2d, cauchy2d)",
                         name);
    return CLI_OK;
}

int args_method(const char *cmd, const char *name, fmk_method *method)
{
    if (fmk_method_from_name(name, method) != FMK_OK)
        return cli_usage(cmd, "--method: unknown method '%s' (auto, direct, tree, fmm)", name);
    return CLI_OK;
}

int args_backend(const char *cmd, const char *name, fmk_backend *backend)
{
    if (fmk_backend_from_name(name, backend) != FMK_OK)
        return cli_usage(cmd, "--backend: unknown backend '%s' (auto, cpu, cuda)", name);
    return CLI_OK;
}

int args_precision(const char *cmd, const char *name, fmk_precision *precision)
{
    if (strcmp(name, "fp64") == 0)
        *precision = FMK_PRECISION_FP64;
    else if (strcmp(name, "fp32") == 0)
        *precision = FMK_PRECISION_FP32;
    else
        return cli_usage(cmd, "--precision: unknown precision '%s' (fp64, fp32)", name);
    return CLI_OK;
}

int args_walk(const char *cmd, const char *name, fmk_walk *walk)
{
    if (strcmp(name, "auto") == 0)
        *walk = FMK_WALK_AUTO;
    else if (strcmp(name, "group") == 0)
        *walk = FMK_WALK_GROUP;
    else if (strcmp(name, "stackless") == 0)
        *walk = FMK_WALK_STACKLESS;
    else
        return cli_usage(cmd, "--walk: unknown walk '%s' (auto, group, stackless)", name);
    return CLI_OK;
}

int args_tree_opts(const char *cmd, int64_t order, int64_t leaf_size, const char *walk,
                   fmk_opts *opts)
{
    if (order > 60)
        return cli_usage(cmd, "--order: %lld is out of range", (long long)order);
    opts->order = (int32_t)order;
    opts->leaf_size = leaf_size;
    return args_walk(cmd, walk, &opts->walk);
}

int args_method_opts(const char *cmd, const args_method_names *names, fmk_kernel *kernel,
                     fmk_opts *opts)
{
    int rc;
    fmk_opts_default(opts);
    if ((rc = args_kernel(cmd, names->kernel, kernel)) != CLI_OK ||
        (rc = args_method(cmd, names->method, &opts->method)) != CLI_OK ||
        (rc = args_backend(cmd, names->backend, &opts->backend)) != CLI_OK ||
        (rc = args_precision(cmd, names->precision, &opts->precision)) != CLI_OK)
        return rc;
    return args_tree_opts(cmd, names->order, names->leaf_size, names->walk, opts);
}
