// `tune run` as a process: ONNX models against onnxruntime with default schedules and with
// tuned records, and the refusals (exit 2, one line, nothing written).
#include <dlfcn.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"

namespace tune::executor {
namespace {

const std::string kTune = std::string(TUNE_BIN_DIR) + "/tune";
const std::string kOnnxDir = TUNE_ONNX_DIR;
const std::string kOrtPython = TUNE_TEST_PYTHON;
const std::string kOrtCheck = std::string(TUNE_SOURCE_DIR) + "/scripts/onnx/ort_check.py";

bool HaveOrt() { return ::access(kOrtPython.c_str(), X_OK) == 0; }

int CountLines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

/// `tune run MODEL --threads 2 --save DIR` then ort_check.py (rtol 1e-3, atol 1e-4 scaled by
/// the output's magnitude when it is below 1) on the saved inputs and outputs.
void RunAndCompare(const std::string& model, const std::string& dir, const std::vector<std::string>& extra,
                   const std::string& expect_in_stdout) {
  std::vector<std::string> argv = {kTune, "run", kOnnxDir + "/" + model, "--threads", "2", "--save", dir};
  argv.insert(argv.end(), extra.begin(), extra.end());
  test::ProcessResult run = test::RunProcess(argv, "", 600);
  ASSERT_TRUE(run.exited && run.exit_code == 0) << run;
  EXPECT_NE(run.out.find(expect_in_stdout), std::string::npos) << run;
  EXPECT_NE(run.out.find("memory: arena"), std::string::npos) << run;
  EXPECT_NE(run.out.find("output output: float32"), std::string::npos) << run;
  if (!HaveOrt()) GTEST_SKIP() << "no onnxruntime environment at " << kOrtPython;
  test::ProcessResult check = test::RunProcess(
      {kOrtPython, kOrtCheck, kOnnxDir + "/" + model, dir, "--threads", "2", "--rtol", "1e-3", "--atol", "1e-4"}, "", 300);
  EXPECT_TRUE(check.exited && check.exit_code == 0) << check;
  EXPECT_NE(check.out.find(": ok"), std::string::npos) << check;
}

TEST(RunCliTest, ResNet18WithDefaultSchedulesMatchesOnnxRuntime) {
  test::TempDir tmp;
  RunAndCompare("resnet18.onnx", tmp.path() + "/out", {}, "0 of 16 tasks tuned; 16 ran the default schedule");
}

TEST(RunCliTest, MobileNetV2WithDefaultSchedulesMatchesOnnxRuntime) {
  test::TempDir tmp;
  RunAndCompare("mobilenet_v2.onnx", tmp.path() + "/out", {}, "ran the default schedule (no --db");
}

TEST(RunCliTest, EncoderWithDefaultSchedulesMatchesOnnxRuntime) {
  test::TempDir tmp;
  RunAndCompare("encoder.onnx", tmp.path() + "/out", {}, "0 of 4 tasks tuned");
}

// --layout nchwc: the convolutions run NCHWc and the outputs still match onnxruntime's.
TEST(RunCliTest, ResNet18InNchwcMatchesOnnxRuntime) {
  test::TempDir tmp;
  // The stem conv has 3 input channels; every other conv is blocked (channels are multiples of
  // 8 and 16): one copy into the blocked layout after the stem, one out before the pool.
  RunAndCompare("resnet18.onnx", tmp.path() + "/out", {"--layout", "nchwc"},
                "19 of 20 convolutions blocked; 1 to-blocked, 1 to-NCHW and 0 re-blocking copies");
}

// Every conv but the 3-channel stem is blocked: the 24-channel ones in blocks of 8 where the
// vector lanes are 16, with re-blocking copies where they meet 16-block ones.
TEST(RunCliTest, MobileNetV2InNchwcMatchesOnnxRuntime) {
  test::TempDir tmp;
  RunAndCompare("mobilenet_v2.onnx", tmp.path() + "/out", {"--layout", "nchwc"}, "51 of 52 convolutions blocked");
}

TEST(RunCliTest, EncoderWithTunedRecordsMatchesOnnxRuntime) {
  test::TempDir tmp;
  const std::string db = tmp.path() + "/tune.db";
  test::ProcessResult tuned = test::RunProcess(
      {kTune, kOnnxDir + "/encoder.onnx", "--target", "llvm", "--trials", "2", "--threads", "2", "--db", db}, "", 600);
  ASSERT_TRUE(tuned.exited && tuned.exit_code == 0) << tuned;
  RunAndCompare("encoder.onnx", tmp.path() + "/out", {"--db", db}, "4 of 4 tasks tuned; 0 ran the default schedule");
  // Another thread count is another target: no records apply.
  test::ProcessResult other = test::RunProcess(
      {kTune, "run", kOnnxDir + "/encoder.onnx", "--threads", "1", "--db", db}, "", 300);
  ASSERT_TRUE(other.exited && other.exit_code == 0) << other;
  EXPECT_NE(other.out.find("0 of 4 tasks tuned"), std::string::npos) << other;
}

TEST(RunCliTest, OrtPythonFlagComparesInProcess) {
  if (!HaveOrt()) GTEST_SKIP() << "no onnxruntime environment at " << kOrtPython;
  test::ProcessResult run = test::RunProcess(
      {kTune, "run", kOnnxDir + "/encoder.onnx", "--threads", "2", "--bench", "3", "--ort-python", kOrtPython}, "", 300);
  ASSERT_TRUE(run.exited && run.exit_code == 0) << run;
  EXPECT_NE(run.out.find("onnxruntime output output"), std::string::npos) << run;
  EXPECT_NE(run.out.find("tune: median"), std::string::npos) << run;
  EXPECT_NE(run.out.find("(same 2 threads): "), std::string::npos) << run;
}

// --bench N --profile: one row per step (every step of the plan named, built-ins too), the
// per-op sums, and the steps' medians summed.
TEST(RunCliTest, ProfilePrintsEveryStep) {
  test::ProcessResult run = test::RunProcess(
      {kTune, "run", kOnnxDir + "/encoder.onnx", "--threads", "2", "--bench", "3", "--profile"}, "", 300);
  ASSERT_TRUE(run.exited && run.exit_code == 0) << run;
  const size_t table = run.out.find("profile: median per step over 3 timed runs");
  ASSERT_NE(table, std::string::npos) << run;
  const size_t sums = run.out.find("profile: the steps' medians sum to ");
  ASSERT_NE(sums, std::string::npos) << run;
  // The encoder's 8 matmul steps (6 matmul, 2 batch_matmul) with their workloads, and its
  // built-ins (Softmax, ReduceMean, ...); then the sums per op.
  const std::string rows = run.out.substr(table, sums - table);
  int matmul_rows = 0;
  for (size_t at = rows.find("matmul 16x"); at != std::string::npos; at = rows.find("matmul 16x", at + 1)) ++matmul_rows;
  EXPECT_EQ(matmul_rows, 6) << run;
  EXPECT_NE(rows.find("batch_matmul 4x16x16x16"), std::string::npos) << run;
  EXPECT_NE(rows.find("Softmax"), std::string::npos) << run;
  EXPECT_NE(rows.find("(built-in)"), std::string::npos) << run;
  EXPECT_NE(rows.find("median us (sum)"), std::string::npos) << run;
}

/// Expects `tune run ARGS --save DIR` to exit 2 with one line on stderr containing `what`
/// and to leave DIR unwritten.
void ExpectRefused(std::vector<std::string> args, const std::string& what) {
  test::TempDir tmp;
  const std::string dir = tmp.path() + "/save";
  std::vector<std::string> argv = {kTune, "run"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--save", dir});
  test::ProcessResult r = test::RunProcess(argv, "", 300);
  ASSERT_TRUE(r.exited) << r;
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_EQ(CountLines(r.err), 1) << r;
  EXPECT_NE(r.err.find(what), std::string::npos) << r;
  EXPECT_TRUE(r.out.empty()) << r;
  EXPECT_FALSE(std::filesystem::exists(dir)) << r;
}

/// Writes an ONNX model Relu -> OP over a [2, 3, 3] input with onnx.helper; its path.
std::string WriteOneOpModel(const std::string& dir, const std::string& op, const std::string& out_shape) {
  const std::string model = dir + "/" + op + ".onnx";
  const std::string script =
      "import onnx, sys\n"
      "from onnx import helper, TensorProto\n"
      "x = helper.make_tensor_value_info('x', TensorProto.FLOAT, [2, 3, 3])\n"
      "y = helper.make_tensor_value_info('y', TensorProto.FLOAT, " + out_shape + ")\n"
      "g = helper.make_graph([helper.make_node('Relu', ['x'], ['r'], name='relu'),"
      " helper.make_node(sys.argv[2], ['r'], ['y'], name=sys.argv[2].lower())], 'g', [x], [y])\n"
      "onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), sys.argv[1])\n";
  test::ProcessResult made = test::RunProcess({"/usr/bin/python3", "-c", script, model, op}, "", 120);
  EXPECT_TRUE(made.exited && made.exit_code == 0) << made;
  return model;
}

TEST(RunCliTest, RefusesAnOpWithoutAKernel) {
  test::TempDir tmp;
  // Sin: the importer knows its shape, the executor has no kernel for it.
  ExpectRefused({WriteOneOpModel(tmp.path(), "Sin", "[2, 3, 3]")}, "Sin.onnx: node 'sin' (Sin) has no built-in kernel");
  // Det: the importer refuses it already, in one line naming the node.
  ExpectRefused({WriteOneOpModel(tmp.path(), "Det", "[2]")}, "node 'det' (Det)");
}

TEST(RunCliTest, RefusesASymbolicDimensionWithoutInput) {
  ExpectRefused({kOnnxDir + "/resnet18_dynbatch.onnx"}, "tune run: ");
  // With --input the same model runs.
  test::ProcessResult r = test::RunProcess(
      {kTune, "run", kOnnxDir + "/resnet18_dynbatch.onnx", "--input", "input=2x3x64x64", "--threads", "2"}, "", 300);
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r;
  EXPECT_NE(r.out.find("output output: float32 [2x1000]"), std::string::npos) << r;
}

TEST(RunCliTest, RefusesATruncatedFileAMissingDatabaseAndCuda) {
  test::TempDir tmp;
  const std::string cut = tmp.path() + "/cut.onnx";
  {
    std::ifstream in(kOnnxDir + "/encoder.onnx", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GT(bytes.size(), 1000u);
    std::ofstream(cut, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 3));
  }
  ExpectRefused({cut}, "cut.onnx");
  ExpectRefused({kOnnxDir + "/encoder.onnx", "--db", tmp.path() + "/none.db"}, "none.db does not exist");
  // Without a CUDA driver, --target cuda is one line, not a crash (on a GPU machine it runs).
  if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) == nullptr) {
    ExpectRefused({kOnnxDir + "/encoder.onnx", "--target", "cuda:0"}, "tune run: no CUDA driver");
  }
  ExpectRefused({kOnnxDir + "/encoder.onnx", "--target", "cuda:x"}, "tune run: ");
  ExpectRefused({kOnnxDir + "/encoder.onnx", "--profile"}, "tune run: --profile needs --bench N");
}

TEST(RunCliTest, RefusesAnUnknownLayoutAndNchwcOnCuda) {
  ExpectRefused({kOnnxDir + "/resnet18.onnx", "--layout", "nhwc"}, "--layout");
  // Refused before any device is looked at, with or without a GPU.
  ExpectRefused({kOnnxDir + "/resnet18.onnx", "--target", "cuda:0", "--layout", "nchwc"},
                "tune run: --layout nchwc is for CPU targets (--target llvm)");
  ExpectRefused({kOnnxDir + "/resnet18.onnx", "--target", "cuda", "--layout", "nchwc"}, "--layout nchwc is for CPU");
}

}  // namespace
}  // namespace tune::executor
