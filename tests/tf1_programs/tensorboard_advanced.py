# ruff: noqa: F821, UP031, UP032, B007, B905  (globals given by the test that runs the program; TF1-era style)
# TensorBoard in more depth, in the style of the classic TF1 examples: an
# MLP in name scopes whose gradients are computed with tf.gradients and
# applied with apply_gradients, histograms of every activation, variable
# and gradient, scalar summaries of the loss and the accuracy, and a
# FileWriter given the default graph. Only the import line differs from a
# TensorFlow 1.x program; `mnist`, EPOCHS and LOGS_PATH are given by the
# test that runs this file (the classic example ran 25 epochs).
import ferrograd.compat.v1 as tf

learning_rate = 0.005
training_epochs = EPOCHS
batch_size = 100
display_epoch = 1
logs_path = LOGS_PATH

n_hidden_1 = 64
n_hidden_2 = 64
n_input = 784
n_classes = 10

tf.set_random_seed(2)
x = tf.placeholder(tf.float32, [None, 784], name="InputData")
y = tf.placeholder(tf.float32, [None, 10], name="LabelData")


def multilayer_perceptron(x, weights, biases):
    layer_1 = tf.add(tf.matmul(x, weights["w1"]), biases["b1"])
    layer_1 = tf.nn.relu(layer_1)
    tf.summary.histogram("relu1", layer_1)
    layer_2 = tf.add(tf.matmul(layer_1, weights["w2"]), biases["b2"])
    layer_2 = tf.nn.relu(layer_2)
    tf.summary.histogram("relu2", layer_2)
    out_layer = tf.add(tf.matmul(layer_2, weights["w3"]), biases["b3"])
    return out_layer


weights = {
    "w1": tf.Variable(tf.random_normal([n_input, n_hidden_1]), name="W1"),
    "w2": tf.Variable(tf.random_normal([n_hidden_1, n_hidden_2]), name="W2"),
    "w3": tf.Variable(tf.random_normal([n_hidden_2, n_classes]), name="W3"),
}
biases = {
    "b1": tf.Variable(tf.random_normal([n_hidden_1]), name="b1"),
    "b2": tf.Variable(tf.random_normal([n_hidden_2]), name="b2"),
    "b3": tf.Variable(tf.random_normal([n_classes]), name="b3"),
}

with tf.name_scope("Model"):
    pred = multilayer_perceptron(x, weights, biases)
with tf.name_scope("Loss"):
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(logits=pred, labels=y))
with tf.name_scope("SGD"):
    optimizer = tf.train.GradientDescentOptimizer(learning_rate)
    grads = tf.gradients(loss, tf.trainable_variables())
    grads = list(zip(grads, tf.trainable_variables()))
    apply_grads = optimizer.apply_gradients(grads_and_vars=grads)
with tf.name_scope("Accuracy"):
    acc = tf.equal(tf.argmax(pred, 1), tf.argmax(y, 1))
    acc = tf.reduce_mean(tf.cast(acc, tf.float32))

init = tf.global_variables_initializer()
tf.summary.scalar("loss", loss)
tf.summary.scalar("accuracy", acc)
for var in tf.trainable_variables():
    tf.summary.histogram(var.name, var)
for grad, var in grads:
    tf.summary.histogram(var.name + "/gradient", grad)
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
                [apply_grads, loss, merged_summary_op], feed_dict={x: batch_xs, y: batch_ys}
            )
            summary_writer.add_summary(summary, epoch * total_batch + i)
            avg_cost += c / total_batch
        if (epoch + 1) % display_epoch == 0:
            print("Epoch:", "%04d" % (epoch + 1), "cost=", "{:.9f}".format(avg_cost))
    summary_writer.close()
    print("Optimization Finished!")
    accuracy_value = acc.eval({x: mnist.test.images, y: mnist.test.labels})
    print("Accuracy:", accuracy_value)
