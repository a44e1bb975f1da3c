// Placeholder: ExtractProgramGraph is being written.
#include "costmodel/program_graph.h"

namespace tune::costmodel {

ProgramGraph ExtractProgramGraph(const codegen::LoweredFunc& func) {
  ProgramGraph g;
  g.num_nodes = 1;
  g.kinds = {NodeKind::kStatement};
  g.features.assign(kNodeFeatures, 0.0f);
  g.sequence = {0};
  return g;
}

const std::vector<std::string>& NodeFeatureNames() {
  static const std::vector<std::string> names(kNodeFeatures, "unused");
  return names;
}

}  // namespace tune::costmodel
