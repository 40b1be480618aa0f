// attn/viz.h — figures: heatmaps and line plots to SVG and PNG.
#pragma once

#include "attn/viz/color.h"
#include "attn/viz/figure.h"
#include "attn/viz/heatmap.h"
#include "attn/viz/line_plot.h"
