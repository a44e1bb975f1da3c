// Placeholder: the offline XGBoost model is being written.
#include "costmodel/offline_model.h"

namespace tune::costmodel {
std::unique_ptr<OfflineModel> MakeXgbOfflineModel() { return nullptr; }
}  // namespace tune::costmodel
