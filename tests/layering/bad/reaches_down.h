#pragma once
// Fixture of the layering checker's self-test: every include below is a violation it must report.
#include "core/array.h"
#include "../gadgets/message.h"
#include <cufft.h>
