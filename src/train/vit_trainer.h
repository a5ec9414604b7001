// `qkv train CONFIG` with `arch = vit`: trains the ViT classifier (vit_model.h) on a generated
// image task (task = shapes: shapes.h), AdamW with clipping and the warm-up + cosine schedule of
// trainer.h, and writes a `clip` GGUF that the mmproj loader (gguf_clip.h) reads, with the
// classifier head: v.head.weight (GGUF dims [dim, classes]), v.head.bias ([classes]) and the
// class names in clip.vision.labels.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../formats/gguf_writer.h"
#include "../vision/image.h"
#include "trainer.h"
#include "vit_model.h"

namespace qkv {

struct VitTrainConfig : TrainRunConfig {
  VitTrainConfig() {
    batch = 64;
    warmup = 100;
    lr = 2e-3f;
    weight_decay = 0.05f;
    beta2 = 0.99f;
    eval_interval = 250;
    log_interval = 25;
  }
  VitTrainShape shape;  // n_classes from `classes` (default: every shape of the task)
  std::string task = "shapes";
  int val_examples = 1000;  // held-out images for validation loss and accuracy
  uint64_t data_seed = 1;   // training and held-out images; seed: initialisation
};

// key = value lines as parse_train_config; unknown keys and bad values throw Error(BadArgument).
VitTrainConfig parse_vit_train_config(const std::string& text, const std::vector<std::string>& overrides = {},
                                      const std::string& origin = "config");

struct VitTrainResult {
  std::vector<double> losses;
  double val_loss = 0.0, val_accuracy = 0.0;  // over cfg.val_examples held-out images
  double seconds = 0.0;
  int64_t params = 0;
};
VitTrainResult run_vit_training(const VitTrainConfig& cfg);

// The preprocessing the saved model declares (image_mean / image_std 0.5, crop), for
// image_size: the trainer feeds its images through preprocess_image with it, as inference does.
ImagePreprocess vit_preprocess(const VitTrainShape& s);
// B RGBA images of s.image_size a side -> (B, 3, size, size) floats through vit_preprocess.
std::vector<float> vit_pixels(const VitTrainShape& s, const uint8_t* rgba, int B);

// The model as a `clip` GGUF: llama.cpp's clip.vision.* keys and v.* tensors, class token, pre and
// post LayerNorm, GELU (clip.use_gelu), no projection, and the head with its labels (n_classes
// strings). Matrices as `type` (F32/F16/BF16); vectors F32.
std::vector<uint8_t> vit_to_gguf(const VitTrainModel& m, const std::vector<std::string>& labels,
                                 const std::string& name, QType type = QType::F32);

}  // namespace qkv
