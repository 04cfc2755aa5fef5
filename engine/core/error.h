// Forwarding header (moved to kernels/common/error.h so every layer can throw it).
#pragma once
#include "kernels/common/error.h"
