/* tmk.h — the same header as Tmk.h, for programs that spell it this way. */
#include "Tmk.h"
