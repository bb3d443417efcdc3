/* libbp_missing_dep.so: a dependency of tp_missing_dep that the dynamic
 * loader cannot find at run time (it is built where no RPATH points). */
#include "backplane/plugin_api.h"

BP_EXPORT int bp_missing_dep_value(void) { return 7; }
