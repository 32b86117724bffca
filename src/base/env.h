/* Environment: parsed once from CCO_ENV_TABLE, read through typed getters. */
#ifndef CCO_BASE_ENV_H_
#define CCO_BASE_ENV_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cco/cco.h"
#include "base/env_table.h"

typedef enum {
#define CCO_ENV_ID_(name, alias, type, def, subsys, choices, help) CCO_ENV_ID_##name,
  CCO_ENV_TABLE(CCO_ENV_ID_)
#undef CCO_ENV_ID_
  CCO_ENV_COUNT
} cco_env_id;

typedef enum { CCO_ENV_STR, CCO_ENV_BOOL, CCO_ENV_INT, CCO_ENV_DOUBLE, CCO_ENV_ENUM } cco_env_type;

typedef struct {
  const char* name;
  const char* alias;
  cco_env_type type;
  const char* defaultText;
  const char* subsys;
  const char* choices;
  const char* help;
} cco_env_desc;

/* Static description of variable `id`. */
const cco_env_desc* cco_env_describe(cco_env_id id);

/* Parses the process environment once (thread safe). Returns ccoSuccess or
 * ccoInvalidArgument; on failure *detail names the variable and the value. */
ccoResult_t cco_env_status(const char** detail);

/* Getters parse on first use. A variable whose value is invalid reads as its
 * default; callers that must refuse bad input call cco_env_status first. */
const char* cco_env_str(cco_env_id id);  /* never NULL; "" when unset */
bool cco_env_bool(cco_env_id id);
int64_t cco_env_int(cco_env_id id);
double cco_env_double(cco_env_id id);
int cco_env_enum(cco_env_id id); /* index into the CHOICES list */
/* The text in force and where it came from ("default", the name or the alias). */
const char* cco_env_text(cco_env_id id, const char** source);

/* Pure parser behind the getters, exposed for unit tests. Fills exactly one of
 * the outputs matching desc->type. Returns 0, or -1 with a message in err. */
typedef struct {
  bool b;
  int64_t i;
  double d;
  int e;
} cco_env_value;
int cco_env_parse(const cco_env_desc* desc, const char* text, cco_env_value* out, char* err,
                  size_t errSize);

/* Re-reads every variable through `lookup` instead of getenv. Unit tests only:
 * not safe while other threads read the environment. */
typedef const char* (*cco_env_lookup_fn)(const char* name, void* arg);
void cco_env_reload_for_test(cco_env_lookup_fn lookup, void* arg);

#endif /* CCO_BASE_ENV_H_ */
