/* Logging to stderr by TCOMMS_LOG_LEVEL, with TCOMMS_<WHO>_LOG_LEVEL overriding per component. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "log.h"

static const char *const level_names[] = {"", "error", "warn", "info", "debug", "trace"};

static int parse_level(const char *text, int dflt)
{
    if (text == NULL || *text == '\0')
        return dflt;
    for (int i = 1; i <= TCOMMS_LOG_TRACE; i++)
        if (strcasecmp(text, level_names[i]) == 0)
            return i;
    if (strcasecmp(text, "warning") == 0)
        return TCOMMS_LOG_WARN;
    if (strcasecmp(text, "none") == 0 || strcmp(text, "0") == 0)
        return 0;
    if (text[0] >= '1' && text[0] <= '5' && text[1] == '\0')
        return text[0] - '0';
    return dflt;
}

/* Read at each call: logging is off the hot path, and tests change the variables between cases. */
static int threshold(const char *who)
{
    int level = parse_level(getenv("TCOMMS_LOG_LEVEL"), TCOMMS_LOG_WARN);
    if (who != NULL && *who != '\0') {
        char var[96] = "TCOMMS_";
        size_t n = strlen(var);
        for (const char *p = who; *p != '\0' && n < sizeof(var) - 12; p++)
            var[n++] = (char)toupper((unsigned char)*p);
        snprintf(var + n, sizeof(var) - n, "_LOG_LEVEL");
        level = parse_level(getenv(var), level);
    }
    return level;
}

int tc_log_enabled(tcomms_log_level_t level, const char *who)
{
    return (int)level <= threshold(who);
}

void tc_vlog(tcomms_log_level_t level, const char *who, const char *fmt, va_list ap)
{
    if (!tc_log_enabled(level, who))
        return;
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    /* One write per line so lines from several threads or ranks do not interleave. */
    char line[1200];
    int n = snprintf(line, sizeof(line), "tcomms[%ld] %s %s: %s\n", (long)getpid(),
                     level >= 1 && level <= 5 ? level_names[level] : "?", who ? who : "core", msg);
    if (n > (int)sizeof(line))
        n = (int)sizeof(line);
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, line, (size_t)n);
        (void)w;
    }
}

void tc_log(tcomms_log_level_t level, const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tc_vlog(level, who, fmt, ap);
    va_end(ap);
}
