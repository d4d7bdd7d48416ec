#pragma once
// Request shapes where the output repeats the prompt, built from real text (a corpus of files)
// and a real tokenizer, each with the answer an ideal model would give (teacher_forced.h):
//   extraction   documents as context (up to a token budget), asked to quote one of their
//                paragraphs; the answer frames that paragraph with words of its own.
//   code-edit    one source file, asked to rename an identifier and return the whole file; the
//                answer is the file with every whole-word occurrence renamed.
//   unrelated    the extraction context, answered with a paragraph of a document not in it: the
//                drafts it gets are chance matches (the cost floor of n-gram drafting).
// Seeded: one (seed, index) gives one request.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace nibble::tools {

struct Document {
  std::string name;  // its path as given, for the prompts
  std::string text;
};

// Files under each path (directories walked, in name order) with a text extension (.md, .txt,
// .cpp, .h, .cu, .cuh, .py, .yaml, .sh); throws std::runtime_error for a path that does not exist
// or a corpus without such a file.
std::vector<Document> read_corpus(const std::vector<std::filesystem::path>& paths);

enum class Workload { kExtraction, kCodeEdit, kUnrelated };
const char* workload_name(Workload w);

struct Request {
  std::vector<tokenizer::TokenId> prompt, answer;
};

class WorkloadBuilder {
 public:
  // Documents are tokenized once here.
  WorkloadBuilder(const tokenizer::Tokenizer& tok, std::vector<Document> corpus);
  // The request of (seed, index) with a context of at most context_tokens (code-edit: the file,
  // which must have between 1/8 of that and all of it). Throws std::runtime_error when the corpus
  // has no document that fits (too small a budget, no source file, one document only for
  // unrelated).
  Request build(Workload w, int context_tokens, std::uint64_t seed, int index) const;

 private:
  Request extraction(int context_tokens, std::uint64_t seed, bool unrelated) const;
  Request code_edit(int context_tokens, std::uint64_t seed) const;

  const tokenizer::Tokenizer& tok_;
  std::vector<Document> docs_;
  std::vector<std::vector<tokenizer::TokenId>> doc_tokens_;  // "### name\n" + text + "\n\n"
};

}  // namespace nibble::tools
