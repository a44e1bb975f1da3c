// Placeholder: LoadTrainingData is being written.
#include "tuner/training_data.h"

namespace tune::tuner {
absl::StatusOr<TrainingData> LoadTrainingData(const TrainingDataOptions&, std::function<void(int64_t, int64_t)>) {
  return absl::UnimplementedError("not yet");
}
absl::StatusOr<std::vector<costmodel::TrainGroup>> LoadGroups(const dataset::RecordDatabase&, int64_t,
                                                              costmodel::InputNeeds, int) {
  return absl::UnimplementedError("not yet");
}
}  // namespace tune::tuner
