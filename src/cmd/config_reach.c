/* config_reach.c — the config's reach sections ("channels", "preferences"; docs/channels.md)
 * parsed apart from the rest of the file, so the daemon can build a new reach on a reload and
 * swap it in while the old one finishes the requests that hold it. */
#include "cmd/config.h"

mv_code mv_config_load_reach(const json_t *root, bool email_enabled, mv_reach **out, mv_err *err) {
    return mv_reach_new(json_object_get(root, "channels"), json_object_get(root, "preferences"),
                        email_enabled, out, err);
}
