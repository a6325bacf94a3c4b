# ruff: noqa: F821, UP031, UP032, B007  (globals given by the test that runs the program; TF1-era style)
# TensorBoard basics in the style of the classic TF1 examples: a logistic
# regression built in name scopes (Model, Loss, SGD, Accuracy), scalar
# summaries of the loss and the accuracy merged with merge_all, and a
# FileWriter given the default graph that records them at every step. Only
# the import line differs from a TensorFlow 1.x program; `mnist`, EPOCHS and
# LOGS_PATH are given by the test that runs this file (the classic example
# ran 25 epochs).
import ferrograd.compat.v1 as tf

learning_rate = 0.1
training_epochs = EPOCHS
batch_size = 100
display_epoch = 1
logs_path = LOGS_PATH

x = tf.placeholder(tf.float32, [None, 784], name="InputData")
y = tf.placeholder(tf.float32, [None, 10], name="LabelData")

W = tf.Variable(tf.zeros([784, 10]), name="Weights")
b = tf.Variable(tf.zeros([10]), name="Bias")

with tf.name_scope("Model"):
    pred = tf.nn.softmax(tf.matmul(x, W) + b)
with tf.name_scope("Loss"):
    cost = tf.reduce_mean(-tf.reduce_sum(y * tf.log(pred), reduction_indices=1))
with tf.name_scope("SGD"):
    optimizer = tf.train.GradientDescentOptimizer(learning_rate).minimize(cost)
with tf.name_scope("Accuracy"):
    acc = tf.equal(tf.argmax(pred, 1), tf.argmax(y, 1))
    acc = tf.reduce_mean(tf.cast(acc, tf.float32))

init = tf.global_variables_initializer()
tf.summary.scalar("loss", cost)
tf.summary.scalar("accuracy", acc)
merged_summary_op = tf.summary.merge_all()

with tf.Session() as sess:
    sess.run(init)
    summary_writer = tf.summary.FileWriter(logs_path, graph=tf.get_default_graph())
    for epoch in range(training_epochs):
        avg_cost = 0.0
        total_batch = int(mnist.train.num_examples / batch_size)
        for i in range(total_batch):
            batch_xs, batch_ys = mnist.train.next_batch(batch_size)
            _, c, summary = sess.run(
                [optimizer, cost, merged_summary_op], feed_dict={x: batch_xs, y: batch_ys}
            )
            summary_writer.add_summary(summary, epoch * total_batch + i)
            avg_cost += c / total_batch
        if (epoch + 1) % display_epoch == 0:
            print("Epoch:", "%04d" % (epoch + 1), "cost=", "{:.9f}".format(avg_cost))
    summary_writer.close()
    print("Optimization Finished!")
    accuracy_value = acc.eval({x: mnist.test.images, y: mnist.test.labels})
    print("Accuracy:", accuracy_value)
