/*
 * fuzz_trace_paths.c: libFuzzer target for the chrome-trace reader's two
 * paths (src/trace/fastpath.c against the token path in events.c),
 * differential: any input is read whole from one buffer, where every event
 * that lies in it goes through the fast path, and one byte per read, where
 * none does. Both must hand over the same events, field by field (NaNs
 * alike, -0 told from 0), stop at the same byte with the same error and
 * count the same cut strings; a difference aborts. The unit test
 * (tests/unit/test_trace.c) holds the two to it on chosen documents; this
 * looks for the documents nobody chose. Both compare through
 * tests/trace_paths.h.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../tests/trace_paths.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > TW_JSTREAM_BUFFER)
        return 0;
    const char *why = paths_differ((const char *)data, size);
    if (why) {
        fprintf(stderr, "fuzz_trace_paths: the fast and token paths differ: %s\n", why);
        abort();
    }
    return 0;
}
