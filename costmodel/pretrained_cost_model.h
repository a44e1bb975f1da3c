// PretrainedCostModel: a search::CostModel that starts from an offline-trained model and keeps learning online.
#pragma once
// Placeholder: being written.
