/* missive.h — the whole public API in one include.
 *
 * Programs include this (or only the area headers they use, the files of include/missive/). Every
 * header here compiles as C11 and as C++; none needs a header outside include/ except jansson.h
 * (JSON values are jansson json_t *). Link with `pkg-config --cflags --libs missive`. */
#ifndef MISSIVE_H
#define MISSIVE_H

/* clang-format off: in layering order, bottom first */
#include "missive/base.h"
#include "missive/defaults.h"
#include "missive/deliver.h"
#include "missive/durable.h"
#include "missive/error.h"
#include "missive/inbox.h"
#include "missive/jsonlogic.h"
#include "missive/message.h"
#include "missive/mustache.h"
#include "missive/operations.h"
#include "missive/reach.h"
#include "missive/reconcile.h"
#include "missive/saga_webhook.h"
#include "missive/store.h"
#include "missive/template.h"
#include "missive/timers.h"
#include "missive/version.h"

#endif
