// Placeholder: the LSTM and GNN models are being written.
#ifdef TUNE_WITH_TORCH
#include "costmodel/offline_model.h"

namespace tune::costmodel {
std::unique_ptr<OfflineModel> MakeLstmModel() { return nullptr; }
std::unique_ptr<OfflineModel> MakeGnnModel() { return nullptr; }
}  // namespace tune::costmodel
#endif
