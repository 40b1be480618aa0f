// Data parallelism without a network: row shards, the dropout generator's
// RowShard, the gradient allreduce and the parameter broadcast against a
// communicator that plays the other processes, and BLEU from summed counts.
#include "attn/optim/data_parallel.h"

#include <gtest/gtest.h>

#include "attn/core/rng.h"
#include "attn/ops/dropout.h"
#include "attn/seq2seq/bleu.h"
#include "testing.h"

using namespace attn;

namespace {

TEST(ShardRows, CoverEveryRowOnceInRankOrder) {
  for (std::int64_t total : {0, 1, 2, 3, 7, 64, 65}) {
    for (int size : {1, 2, 3, 8}) {
      std::int64_t next = 0, smallest = total, largest = 0;
      for (int rank = 0; rank < size; ++rank) {
        const optim::RowRange r = optim::shard_rows(total, rank, size);
        EXPECT_EQ(r.first, next) << total << " rows, process " << rank << " of " << size;
        next += r.count;
        smallest = std::min(smallest, r.count);
        largest = std::max(largest, r.count);
      }
      EXPECT_EQ(next, total);
      EXPECT_LE(largest - smallest, 1);
    }
  }
  EXPECT_THROW(optim::shard_rows(4, 2, 2), ValueError);
}

// Dropout of a (5, 3, 4) batch drawn whole, and drawn as rows [0, 2) and
// [2, 5) by two "processes" from generators in the same state: 12 numbers
// per row, a multiple of Philox's block of 4, so the parts are the very
// rows of the whole, and every generator ends where the whole draw's does.
TEST(RowShard, ShardsOfADrawAreItsRows) {
  const Tensor x = ones({5, 3, 4});
  Generator whole(42);
  whole.set_offset(7);
  const Tensor y = dropout(x, 0.5, true, whole);
  Tensor parts[2];
  const optim::RowRange ranges[2] = {{0, 2}, {2, 3}};
  for (int k = 0; k < 2; ++k) {
    Generator g(42);
    g.set_offset(7);
    {
      RowShardScope scope(g, {static_cast<std::uint64_t>(ranges[k].first),
                              static_cast<std::uint64_t>(ranges[k].count), 5});
      parts[k] = dropout(x.narrow(0, ranges[k].first, ranges[k].count).contiguous(), 0.5, true, g);
    }
    EXPECT_EQ(g.offset(), whole.offset());
    EXPECT_EQ(g.row_shard().total, 0u);  // the scope restored "none"
    const Tensor expect = y.narrow(0, ranges[k].first, ranges[k].count).contiguous();
    ASSERT_EQ(parts[k].shape(), expect.shape());
    for (std::int64_t i = 0; i < expect.numel(); ++i)
      EXPECT_EQ(parts[k].data<float>()[i], expect.data<float>()[i]) << "part " << k << ", " << i;
  }
}

// 3 numbers per row: each row takes a whole block; the parts are disjoint,
// and all generators end at one offset.
TEST(RowShard, UnalignedRowsTakeDisjointBlocks) {
  const std::uint64_t total = 7, per_row = 3;
  std::uint64_t end_offset = 0;
  std::uint64_t last_end = 100;
  for (std::uint64_t first = 0; first < total; first += 2) {
    const std::uint64_t rows = std::min<std::uint64_t>(2, total - first);
    Generator g(1);
    g.set_offset(100);
    g.set_row_shard({first, rows, total});
    const std::uint64_t start = g.reserve(rows * per_row);
    EXPECT_GE(start, last_end) << "rows from " << first;
    last_end = start + (rows * per_row + 3) / 4;
    if (first == 0)
      end_offset = g.offset();
    else
      EXPECT_EQ(g.offset(), end_offset);
    EXPECT_LE(last_end, g.offset());
  }
  Generator g(1);
  g.set_row_shard({0, 2, 7});
  EXPECT_THROW(g.reserve(5), InternalError);  // 5 numbers are not 2 rows
  EXPECT_THROW(g.set_row_shard({6, 2, 7}), ValueError);
}

// Plays processes 1.. of a run: their part of every sum is `others`, and
// their broadcast values `root_values`.
class FakeComm : public optim::Communicator {
 public:
  std::vector<float> others;
  std::vector<double> others64;
  std::vector<float> root_values;
  int calls = 0;
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void allreduce_sum(std::span<float> d) override {
    ++calls;
    ASSERT_EQ(d.size(), others.size());
    for (std::size_t i = 0; i < d.size(); ++i) d[i] += others[i];
  }
  void allreduce_sum(std::span<double> d) override {
    ++calls;
    ASSERT_EQ(d.size(), others64.size());
    for (std::size_t i = 0; i < d.size(); ++i) d[i] += others64[i];
  }
  // Process 0's ordered sum is x0 + x1, as the allreduce's.
  void ordered_sum(std::span<float> d) override { allreduce_sum(d); }
  void ordered_sum(std::span<double> d) override { allreduce_sum(d); }
  void broadcast(std::span<float> d, int root) override {
    EXPECT_EQ(root, 0);
    std::copy_n(root_values.begin(), d.size(), d.begin());
    root_values.erase(root_values.begin(), root_values.begin() + static_cast<long>(d.size()));
  }
  void broadcast(std::string&, int) override {}
};

TEST(AllreduceGradients, SumsEveryGradientAndTheExtras) {
  Tensor a = attn::testing::rand32({2, 3}, 1), b = attn::testing::rand32({4}, 2),
         c = attn::testing::rand32({3}, 3);
  for (Tensor* t : {&a, &b, &c}) t->requires_grad_();
  const Tensor ga = attn::testing::rand32({2, 3}, 4), gc = attn::testing::rand32({3}, 5);
  a.set_grad(ga.clone());
  c.set_grad(gc.clone());  // b has no gradient: it contributes zeros
  FakeComm comm;
  for (int i = 0; i < 13; ++i) comm.others.push_back(0.25f * static_cast<float>(i + 1));
  comm.others64 = {10.0, 20.0};
  std::vector<double> extra = {1.5, -2.0};
  std::vector<float> buffer;
  optim::allreduce_gradients(comm, {a, b, c}, extra, buffer);
  EXPECT_EQ(comm.calls, 2);
  EXPECT_DOUBLE_EQ(extra[0], 11.5);
  EXPECT_DOUBLE_EQ(extra[1], 18.0);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(a.grad().data<float>()[i], ga.data<float>()[i] + comm.others[i]);
  ASSERT_TRUE(b.grad().defined());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(b.grad().data<float>()[i], comm.others[6 + i]);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(c.grad().data<float>()[i], gc.data<float>()[i] + comm.others[10 + i]);
}

TEST(AllreduceGradients, SharedGradientMemoryIsNotOverwritten) {
  Tensor a = attn::testing::rand32({3}, 1), b = attn::testing::rand32({3}, 2);
  a.requires_grad_();
  b.requires_grad_();
  const Tensor g = attn::testing::rand32({3}, 3), g0 = g.clone();
  a.set_grad(g);
  b.set_grad(g);  // one tensor, two parameters
  FakeComm comm;
  comm.others = {1, 2, 3, 10, 20, 30};
  std::vector<float> buffer;
  optim::allreduce_gradients(comm, {a, b}, {}, buffer);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a.grad().data<float>()[i], g0.data<float>()[i] + comm.others[i]);
    EXPECT_EQ(b.grad().data<float>()[i], g0.data<float>()[i] + comm.others[3 + i]);
  }
}

TEST(BroadcastParameters, EveryParameterTakesTheRootsValues) {
  Tensor a = zeros({2, 2}), b = zeros({3});
  FakeComm comm;
  comm.root_values = {1, 2, 3, 4, 5, 6, 7};
  optim::broadcast_parameters(comm, {a, b});
  EXPECT_EQ(a.data<float>()[3], 4.0f);
  EXPECT_EQ(b.data<float>()[0], 5.0f);
  EXPECT_EQ(b.data<float>()[2], 7.0f);
  Tensor d = zeros({2}, DType::f64);
  EXPECT_THROW(optim::broadcast_parameters(comm, {d}), ValueError);
}

// Corpus BLEU of a corpus = BLEU from the summed counts of its parts (what a
// data-parallel validation adds up).
TEST(BleuFromCounts, PartsOfACorpusGiveTheWholeScore) {
  const std::vector<std::string> hyp = {"Le chat est sur le tapis.", "Il pleut.",
                                        "Je suis à la maison.", "Bonjour", "Va !"};
  const std::vector<std::string> ref = {"Le chat est sur le tapis.", "Il pleut beaucoup.",
                                        "Je suis chez moi.", "Bonjour !", "Va !"};
  const seq2seq::BleuScore whole = seq2seq::corpus_bleu_13a(hyp, ref);
  const seq2seq::BleuScore p1 =
      seq2seq::corpus_bleu_13a({hyp.begin(), hyp.begin() + 2}, {ref.begin(), ref.begin() + 2});
  const seq2seq::BleuScore p2 =
      seq2seq::corpus_bleu_13a({hyp.begin() + 2, hyp.end()}, {ref.begin() + 2, ref.end()});
  seq2seq::BleuScore sum;
  for (std::size_t n = 0; n < 4; ++n) {
    sum.counts[n] = p1.counts[n] + p2.counts[n];
    sum.totals[n] = p1.totals[n] + p2.totals[n];
  }
  sum.sys_len = p1.sys_len + p2.sys_len;
  sum.ref_len = p1.ref_len + p2.ref_len;
  const seq2seq::BleuScore combined = seq2seq::bleu_from_counts(sum);
  EXPECT_GT(whole.score, 0);
  EXPECT_EQ(combined.score, whole.score);
  EXPECT_EQ(combined.bp, whole.bp);
  EXPECT_EQ(combined.precisions, whole.precisions);
  EXPECT_NE(p1.score, whole.score);  // the parts alone score otherwise
}

}  // namespace
