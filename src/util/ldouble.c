/* INCRBYFLOAT arithmetic in x87 long double, as Redis does it (strtold, +, "%.17Lf" trimmed).
 * Rust has no 80-bit float; this shim keeps the long double on the C side. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LONG_DOUBLE_CHARS (5 * 1024)

/* Redis's string2ld: the whole string must parse, no leading space, no NaN, no overflow. */
static int parse_ld(const char *s, size_t len, long double *out) {
    char buf[MAX_LONG_DOUBLE_CHARS];
    char *eptr;
    long double value;
    if (len == 0 || len >= sizeof(buf)) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    value = strtold(buf, &eptr);
    if (isspace((unsigned char)buf[0]) || eptr[0] != '\0' || (size_t)(eptr - buf) != len ||
        (errno == ERANGE && (value == HUGE_VALL || value == -HUGE_VALL || fpclassify(value) == FP_ZERO)) ||
        isnan(value))
        return 0;
    *out = value;
    return 1;
}

/* Redis's ld2string in human mode. Returns the length written, 0 if it does not fit. */
static size_t format_ld(long double value, char *buf, size_t cap) {
    int l;
    if (isinf(value)) {
        if (cap < 5) return 0;
        if (value > 0) { memcpy(buf, "inf", 3); return 3; }
        memcpy(buf, "-inf", 4);
        return 4;
    }
    l = snprintf(buf, cap, "%.17Lf", value);
    if (l < 0 || (size_t)l + 1 > cap) return 0;
    if (strchr(buf, '.') != NULL) {
        char *p = buf + l - 1;
        while (*p == '0') { p--; l--; }
        if (*p == '.') l--;
    }
    if (l == 2 && buf[0] == '-' && buf[1] == '0') { buf[0] = '0'; l = 1; }
    return (size_t)l;
}

/* cur (may be NULL for a missing key, meaning 0) + incr, formatted into out.
 * Returns the length, or -1 if cur is not a float, -2 if incr is not, -3 if the result is
 * NaN or infinite, -4 if out is too small. */
long ferrodis_incrbyfloat(const char *cur, size_t curlen, const char *incr, size_t incrlen, char *out, size_t cap) {
    long double a = 0, b;
    size_t n;
    if (cur != NULL && !parse_ld(cur, curlen, &a)) return -1;
    if (!parse_ld(incr, incrlen, &b)) return -2;
    a += b;
    if (isnan(a) || isinf(a)) return -3;
    n = format_ld(a, out, cap);
    if (n == 0) return -4;
    return (long)n;
}

/* Whether s parses as a long double (Redis's getLongDoubleFromObject). */
int ferrodis_is_long_double(const char *s, size_t len) {
    long double v;
    return parse_ld(s, len, &v);
}

/* A blocking timeout in seconds as Redis 7.0 reads it: long double, ceil(v * 1000) converted to a
 * 64-bit integer (out-of-range values convert to the most negative integer, as on x86-64).
 * Returns 0 if the text is not a valid long double. */
int ferrodis_timeout_ms(const char *s, size_t len, long long *out) {
    long double v;
    if (!parse_ld(s, len, &v)) return 0;
    *out = (long long)ceill(v * 1000.0L);
    return 1;
}
