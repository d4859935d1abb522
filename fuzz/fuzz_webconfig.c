/*
 * fuzz_webconfig.c: libFuzzer target for the exporter-toolkit web
 * configuration parser (YAML via libyaml) and the bcrypt check.
 */
#include <stddef.h>
#include <stdint.h>

#include "http/webconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tw_web_config c;
    char err[256];
    if (tw_web_config_parse((const char *)data, size, "/nonexistent", &c, err, sizeof err) == 0) {
        for (size_t i = 0; i < c.user_count && i < 2; i++)
            tw_password_matches(c.user_hashes[i], "password");
        tw_web_config_free(&c);
    }
    return 0;
}
