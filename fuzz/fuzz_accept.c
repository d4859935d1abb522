/*
 * fuzz_accept.c: libFuzzer target for the Accept and Accept-Encoding header
 * parsers used in content negotiation.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_text.h"
#include "trainwatch/metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *header = fuzz_text(data, size);
    if (!header)
        return 0;
    tw_expose_format f = tw_negotiate_format(header);
    if (f != TW_EXPOSE_TEXT && f != TW_EXPOSE_OPENMETRICS)
        abort();
    (void)tw_accepts_gzip(header);
    free(header);
    return 0;
}
