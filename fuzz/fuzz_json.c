/*
 * fuzz_json.c: libFuzzer target for the JSON pull reader and writer: any
 * input is read member by member; every string read is written back out.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tw_json_reader r;
    tw_json_member m;
    FILE *null = fopen("/dev/null", "w");
    if (!null)
        return 0;
    if (tw_json_begin(&r, (const char *)data, size)) {
        for (int i = 0; i < 100000; i++) {
            tw_json_type t = tw_json_next(&r, &m);
            if (t == TW_JSON_ERROR || (t == TW_JSON_END && r.p >= r.end))
                break;
            if (t == TW_JSON_STRING)
                tw_json_string(null, m.string, m.string_len);
            if (t == TW_JSON_NUMBER)
                tw_json_number(null, m.number);
        }
    }
    tw_json_string(null, (const char *)data, size);
    fclose(null);
    return 0;
}
