// mconv: umbrella header of the C++ API.
#pragma once

#include "mconv/backward.hpp"
#include "mconv/cpu.hpp"
#include "mconv/engine.hpp"
#include "mconv/file.hpp"
#include "mconv/hardware.hpp"
#include "mconv/npy.hpp"
#include "mconv/numeric.hpp"
#include "mconv/plan.hpp"
#include "mconv/problem.hpp"
#include "mconv/types.hpp"
