/* Environment table: one parse per process, typed getters, clear errors. */
#include "base/env.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const cco_env_desc g_descs[CCO_ENV_COUNT] = {
#define CCO_ENV_DESC_(name, alias, type, def, subsys, choices, help) \
  {#name, alias, CCO_ENV_##type, def, #subsys, choices, help},
    CCO_ENV_TABLE(CCO_ENV_DESC_)
#undef CCO_ENV_DESC_
};

typedef struct {
  char* text;         /* value in force (owned copy); default when unset or invalid */
  const char* source; /* "default", name or alias */
  cco_env_value value;
} cco_env_entry;

static cco_env_entry g_entries[CCO_ENV_COUNT];
static char g_error[512];
static ccoResult_t g_status = ccoSuccess;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

const cco_env_desc* cco_env_describe(cco_env_id id) {
  if ((int)id < 0 || id >= CCO_ENV_COUNT) return NULL;
  return &g_descs[id];
}

static int parse_enum(const char* choices, const char* text) {
  size_t n = strlen(text);
  int index = 0;
  for (const char* p = choices; *p;) {
    const char* comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len == n && strncasecmp(p, text, n) == 0) return index;
    index++;
    if (!comma) break;
    p = comma + 1;
  }
  return -1;
}

int cco_env_parse(const cco_env_desc* desc, const char* text, cco_env_value* out, char* err,
                  size_t errSize) {
  char* end = NULL;
  memset(out, 0, sizeof(*out));
  switch (desc->type) {
    case CCO_ENV_STR:
      return 0;
    case CCO_ENV_BOOL:
      if (!strcmp(text, "1") || !strcasecmp(text, "true") || !strcasecmp(text, "yes") ||
          !strcasecmp(text, "on")) {
        out->b = true;
        return 0;
      }
      if (!strcmp(text, "0") || !strcasecmp(text, "false") || !strcasecmp(text, "no") ||
          !strcasecmp(text, "off") || text[0] == '\0') {
        out->b = false;
        return 0;
      }
      snprintf(err, errSize, "%s='%s' is not a boolean (use 1/0, true/false, yes/no, on/off)",
               desc->name, text);
      return -1;
    case CCO_ENV_INT: {
      errno = 0;
      /* Decimal unless 0x: "010" is ten to a user, not eight. */
      const char* digits = text + (text[0] == '-' || text[0] == '+');
      int base = (digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) ? 16 : 10;
      long long v = strtoll(text, &end, base);
      while (end && isspace((unsigned char)*end)) end++;
      if (text[0] == '\0' || errno != 0 || !end || *end != '\0') {
        snprintf(err, errSize, "%s='%s' is not an integer", desc->name, text);
        return -1;
      }
      out->i = v;
      return 0;
    }
    case CCO_ENV_DOUBLE: {
      errno = 0;
      double v = strtod(text, &end);
      while (end && isspace((unsigned char)*end)) end++;
      if (text[0] == '\0' || errno != 0 || !end || *end != '\0' || !isfinite(v) || v < 0) {
        snprintf(err, errSize, "%s='%s' is not a non-negative number", desc->name, text);
        return -1;
      }
      out->d = v;
      return 0;
    }
    case CCO_ENV_ENUM: {
      int e = parse_enum(desc->choices, text);
      if (e < 0) {
        snprintf(err, errSize, "%s='%s' is not one of %s", desc->name, text, desc->choices);
        return -1;
      }
      out->e = e;
      return 0;
    }
  }
  snprintf(err, errSize, "%s: unknown type", desc->name);
  return -1;
}

static const char* getenv_lookup(const char* name, void* arg) {
  (void)arg;
  return getenv(name);
}

static void load_all(cco_env_lookup_fn lookup, void* arg) {
  g_status = ccoSuccess;
  g_error[0] = '\0';
  for (int id = 0; id < CCO_ENV_COUNT; id++) {
    const cco_env_desc* d = &g_descs[id];
    cco_env_entry* e = &g_entries[id];
    const char* text = lookup(d->name, arg);
    const char* source = d->name;
    if (!text && d->alias) {
      text = lookup(d->alias, arg);
      source = d->alias;
    }
    free(e->text);
    e->text = NULL;
    char err[256];
    cco_env_value value;
    if (text && cco_env_parse(d, text, &value, err, sizeof(err)) == 0) {
      e->text = strdup(text);
      e->source = source;
      e->value = value;
    } else {
      if (text && g_status == ccoSuccess) {
        /* First bad variable wins the message; the rest fall back too. */
        g_status = ccoInvalidArgument;
        if (source == d->alias)
          snprintf(g_error, sizeof(g_error), "%s (set as its alias %s)", err, d->alias);
        else
          snprintf(g_error, sizeof(g_error), "%s", err);
      }
      /* Defaults are compile-time constants that the unit tests parse. */
      (void)cco_env_parse(d, d->defaultText, &value, err, sizeof(err));
      e->text = strdup(d->defaultText);
      e->source = "default";
      e->value = value;
    }
  }
}

static void load_once(void) { load_all(getenv_lookup, NULL); }

static void ensure_loaded(void) { pthread_once(&g_once, load_once); }

void cco_env_reload_for_test(cco_env_lookup_fn lookup, void* arg) {
  ensure_loaded();
  load_all(lookup ? lookup : getenv_lookup, arg);
}

ccoResult_t cco_env_status(const char** detail) {
  ensure_loaded();
  if (detail) *detail = g_error;
  return g_status;
}

static const cco_env_entry* entry(cco_env_id id) {
  ensure_loaded();
  if ((int)id < 0 || id >= CCO_ENV_COUNT) return NULL;
  return &g_entries[id];
}

const char* cco_env_str(cco_env_id id) {
  const cco_env_entry* e = entry(id);
  return e && e->text ? e->text : "";
}
bool cco_env_bool(cco_env_id id) {
  const cco_env_entry* e = entry(id);
  return e ? e->value.b : false;
}
int64_t cco_env_int(cco_env_id id) {
  const cco_env_entry* e = entry(id);
  return e ? e->value.i : 0;
}
double cco_env_double(cco_env_id id) {
  const cco_env_entry* e = entry(id);
  return e ? e->value.d : 0.0;
}
int cco_env_enum(cco_env_id id) {
  const cco_env_entry* e = entry(id);
  return e ? e->value.e : 0;
}
const char* cco_env_text(cco_env_id id, const char** source) {
  const cco_env_entry* e = entry(id);
  if (source) *source = e ? e->source : "default";
  return e && e->text ? e->text : "";
}
